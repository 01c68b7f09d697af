// JSON parsing for checkpoint files (safetensors headers, index files) that refuses what
// nlohmann_json silently accepts: a repeated key in one object. nlohmann keeps the last value, so
// a header naming a tensor twice would otherwise load whichever entry came last.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace fp4serve {

// Parses `text`; throws CheckpointError(path, "<what> is not valid JSON: ...") on a syntax error
// and CheckpointError(path, "<what> has duplicate key 'k' ...") on a repeated key.
nlohmann::json parse_json_strict(std::string_view text, const std::string& path, std::string_view what);

// Short human-readable name of a JSON value's type ("string", "array", ...), for error messages.
std::string json_type_name(const nlohmann::json& value);

}  // namespace fp4serve
