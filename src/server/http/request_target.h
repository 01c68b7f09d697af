// Splitting an origin-form request-target into the path routing sees and the raw query.
#pragma once

#include <string>
#include <string_view>

namespace fp4serve::http {

// path = the part before '?', percent-decoded (Starlette routes on the decoded path; an invalid
// escape is kept literally, as Python's urllib.parse.unquote does); query = the rest, undecoded.
// An absolute-form target ("http://host/p") is reduced to its path.
void split_target(std::string_view target, std::string& path, std::string& query);

std::string percent_decode(std::string_view s);

}  // namespace fp4serve::http
