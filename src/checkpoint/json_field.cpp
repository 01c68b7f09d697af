#include "checkpoint/json_field.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "checkpoint/checkpoint_error.h"

namespace fp4serve {

std::string JsonField::child_path(std::string_view key) const {
  if (path_.empty()) return std::string(key);
  return path_ + "." + std::string(key);
}

std::string JsonField::type_name() const {
  switch (node_->type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::object: return "object";
    case nlohmann::json::value_t::array: return "array";
    case nlohmann::json::value_t::string: return "string";
    case nlohmann::json::value_t::boolean: return "boolean";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned: return "integer";
    case nlohmann::json::value_t::number_float: return "number";
    default: return "value";
  }
}

void JsonField::fail(std::string_view fault) const {
  if (path_.empty()) throw CheckpointError(file_, std::string(fault));
  throw CheckpointError(file_, path_ + ": " + std::string(fault));
}

std::optional<JsonField> JsonField::find(std::string_view key) const {
  if (!node_->is_object()) fail("expected an object, got " + type_name());
  auto it = node_->find(std::string(key));
  if (it == node_->end() || it->is_null()) return std::nullopt;
  return JsonField(*it, file_, child_path(key));
}

JsonField JsonField::at(std::string_view key) const {
  auto f = find(key);
  if (!f) throw CheckpointError(file_, child_path(key) + ": missing");
  return *f;
}

int64_t JsonField::as_int() const {
  if (node_->is_number_integer()) return node_->get<int64_t>();
  if (node_->is_number_float()) {
    double v = node_->get<double>();
    if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9.0e15) return static_cast<int64_t>(v);
    fail("expected an integer, got " + node_->dump());
  }
  fail("expected an integer, got " + type_name());
}

double JsonField::as_double() const {
  if (node_->is_number()) return node_->get<double>();
  fail("expected a number, got " + type_name());
}

bool JsonField::as_bool() const {
  if (node_->is_boolean()) return node_->get<bool>();
  fail("expected true or false, got " + type_name());
}

std::string JsonField::as_string() const {
  if (node_->is_string()) return node_->get<std::string>();
  fail("expected a string, got " + type_name());
}

std::vector<JsonField> JsonField::as_array() const {
  if (!node_->is_array()) fail("expected an array, got " + type_name());
  std::vector<JsonField> out;
  out.reserve(node_->size());
  for (size_t i = 0; i < node_->size(); ++i)
    out.emplace_back((*node_)[i], file_, path_ + "[" + std::to_string(i) + "]");
  return out;
}

std::vector<int64_t> JsonField::as_int_list() const {
  std::vector<int64_t> out;
  for (const auto& e : as_array()) out.push_back(e.as_int());
  return out;
}

std::vector<std::string> JsonField::as_string_list() const {
  std::vector<std::string> out;
  for (const auto& e : as_array()) out.push_back(e.as_string());
  return out;
}

std::vector<std::pair<std::string, JsonField>> JsonField::members() const {
  if (!node_->is_object()) fail("expected an object, got " + type_name());
  std::vector<std::pair<std::string, JsonField>> out;
  for (auto it = node_->begin(); it != node_->end(); ++it)
    out.emplace_back(it.key(), JsonField(it.value(), file_, child_path(it.key())));
  return out;
}

int64_t JsonField::get_int(std::string_view key, int64_t fallback) const {
  auto f = find(key);
  return f ? f->as_int() : fallback;
}

double JsonField::get_double(std::string_view key, double fallback) const {
  auto f = find(key);
  return f ? f->as_double() : fallback;
}

bool JsonField::get_bool(std::string_view key, bool fallback) const {
  auto f = find(key);
  return f ? f->as_bool() : fallback;
}

std::string JsonField::get_string(std::string_view key, std::string fallback) const {
  auto f = find(key);
  return f ? f->as_string() : fallback;
}

CheckpointJson parse_json_text(std::string_view text, const std::string& file) {
  try {
    return CheckpointJson::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    throw CheckpointError(file, std::string("invalid JSON: ") + e.what());
  }
}

std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CheckpointError(path.string(), "cannot open file");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw CheckpointError(path.string(), "read error");
  return ss.str();
}

}  // namespace fp4serve
