#include "checkpoint/strict_json.h"

#include <optional>
#include <set>
#include <vector>

#include "checkpoint/checkpoint_error.h"

namespace fp4serve {

nlohmann::json parse_json_strict(std::string_view text, const std::string& path, std::string_view what) {
  using Event = nlohmann::json::parse_event_t;
  // One key set per open object; arrays open no set because they have no keys.
  std::vector<std::set<std::string>> open_objects;
  std::optional<std::string> duplicate;
  int duplicate_depth = 0;
  auto on_event = [&](int depth, Event event, nlohmann::json& parsed) {
    switch (event) {
      case Event::object_start:
        open_objects.emplace_back();
        break;
      case Event::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        break;
      case Event::key:
        if (!open_objects.empty() && !duplicate) {
          auto key = parsed.get<std::string>();
          if (!open_objects.back().insert(key).second) {
            duplicate = std::move(key);
            duplicate_depth = depth;
          }
        }
        break;
      default:
        break;
    }
    return true;
  };

  // nlohmann's lexer takes a NUL byte for the end of input and would ignore everything after it
  // ("{}\0garbage" parses); serde_json, the reference, refuses it, and so do we.
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    throw CheckpointError(path, std::string(what) + " is not valid JSON: NUL byte at offset " +
                                    std::to_string(nul));
  }
  nlohmann::json result;
  try {
    result = nlohmann::json::parse(text.begin(), text.end(), on_event);
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(path, std::string(what) + " is not valid JSON: " + e.what());
  }
  if (duplicate) {
    const char* level = duplicate_depth <= 1 ? "at top level" : "in a nested object";
    throw CheckpointError(path, std::string(what) + " has duplicate key '" + *duplicate + "' " + level);
  }
  return result;
}

std::string json_type_name(const nlohmann::json& value) {
  if (value.is_number_integer()) return "integer";
  if (value.is_number_float()) return "float";
  return value.type_name();
}

}  // namespace fp4serve
