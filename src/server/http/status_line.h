// HTTP/1.x response serialization: status line, header block, chunk framing. Written by hand
// (small and allocation-light) so that whole responses, stream heads and chunks all go through one
// byte queue per connection.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "server/http/http_message.h"

namespace fp4serve::http {

// Reason phrase of a status code as Python's HTTPStatus(code).phrase spells it ("Not Found",
// "Payload Too Large" -> vLLM uses these as the error "type"); "Unknown" for codes not listed.
const char* reason_phrase(int status);

// Framing of a response body on the wire.
enum class BodyFraming { content_length, chunked, until_close };

// Status line + headers + blank line. content_length is used only with BodyFraming::content_length.
// Throws std::invalid_argument when a header name or value contains CR, LF or NUL (response
// splitting) or the status is outside 100..999.
std::string serialize_head(unsigned version, int status, std::string_view content_type,
                           const std::vector<Header>& headers, BodyFraming framing,
                           std::size_t content_length, bool keep_alive);

// One chunk of a chunked body: "<hex size>\r\n<data>\r\n". data must be non-empty.
std::string frame_chunk(std::string_view data);
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";

}  // namespace fp4serve::http
