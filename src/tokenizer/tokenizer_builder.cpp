// Tokenizer::from_files: reads the pieces of tokenizer.json we support and refuses the rest with a
// message naming the field, so an unsupported tokenizer never silently gives different ids.
#include <set>

#include <nlohmann/json.hpp>

#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_error.h"

namespace fp4serve::tokenizer {
namespace {

using nlohmann::json;

// The GPT-2 pattern HF's ByteLevel pre-tokenizer uses when use_regex is true.
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

bool flag(const json& j, const char* key, bool fallback) {
  const auto it = j.find(key);
  return (it == j.end() || it->is_null()) ? fallback : it->get<bool>();
}

struct PreTokenizerPlan {
  std::vector<std::string> patterns;
  bool byte_level = false;
};

void plan_pre_tokenizer(const json& spec, PreTokenizerPlan& plan, const std::string& what) {
  if (spec.is_null()) return;
  const std::string type = spec.value("type", "");
  if (type == "Sequence") {
    for (const auto& inner : spec.at("pretokenizers")) plan_pre_tokenizer(inner, plan, what);
  } else if (type == "Split") {
    if (spec.value("behavior", "") != "Isolated" || flag(spec, "invert", false))
      throw TokenizerError(what + ": pre_tokenizer Split is supported only with behavior Isolated, invert false");
    const json& pattern = spec.at("pattern");
    if (pattern.contains("Regex")) {
      plan.patterns.push_back(pattern.at("Regex").get<std::string>());
    } else if (pattern.contains("String")) {
      plan.patterns.push_back("\\Q" + pattern.at("String").get<std::string>() + "\\E");
    } else {
      throw TokenizerError(what + ": pre_tokenizer Split pattern must be Regex or String");
    }
  } else if (type == "ByteLevel") {
    if (flag(spec, "add_prefix_space", false))
      throw TokenizerError(what + ": pre_tokenizer ByteLevel add_prefix_space=true is not supported");
    if (flag(spec, "use_regex", true)) plan.patterns.push_back(kGpt2Pattern);
    plan.byte_level = true;
  } else {
    throw TokenizerError(what + ": pre_tokenizer type '" + type + "' is not supported");
  }
}

std::vector<std::pair<std::string, std::string>> read_merges(const json& merges, const std::string& what) {
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(merges.size());
  for (const auto& m : merges) {
    if (m.is_string()) {  // legacy "a b"
      const std::string s = m.get<std::string>();
      const std::size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
        throw TokenizerError(what + ": merge '" + s + "' is not two tokens separated by one space");
      out.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else if (m.is_array() && m.size() == 2) {
      out.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      throw TokenizerError(what + ": model.merges entry " + m.dump() + " is neither \"a b\" nor [\"a\", \"b\"]");
    }
  }
  return out;
}

AddedToken read_added_token(const json& j, std::int32_t id) {
  AddedToken t;
  t.id = id;
  t.content = j.at("content").get<std::string>();
  t.single_word = flag(j, "single_word", false);
  t.lstrip = flag(j, "lstrip", false);
  t.rstrip = flag(j, "rstrip", false);
  t.special = flag(j, "special", false);
  t.normalized = flag(j, "normalized", !t.special);  // HF's default: special tokens are not normalized
  return t;
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::load(const std::filesystem::path& path) {
  return from_files(read_tokenizer_files(path));
}

std::unique_ptr<Tokenizer> Tokenizer::from_files(const TokenizerFiles& files) {
  std::unique_ptr<Tokenizer> tok(new Tokenizer());
  const std::string what = files.tokenizer_json_path.string();
  tok->source_ = what;
  const json& root = files.tokenizer_json;
  try {
    // Model.
    const json& model = root.at("model");
    if (model.value("type", "BPE") != "BPE")
      throw TokenizerError(what + ": model type '" + model.value("type", "") + "' is not supported (only BPE)");
    if (model.contains("dropout") && !model["dropout"].is_null() && model["dropout"].get<double>() != 0.0)
      throw TokenizerError(what + ": model.dropout is not supported");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
      if (model.contains(key) && !model[key].is_null() && !model[key].get<std::string>().empty())
        throw TokenizerError(what + ": model." + key + " is not supported");
    }
    std::vector<std::pair<std::string, std::int32_t>> vocab;
    vocab.reserve(model.at("vocab").size());
    for (const auto& [token, id] : model.at("vocab").items()) vocab.emplace_back(token, id.get<std::int32_t>());
    BpeModel::Options options;
    options.ignore_merges = flag(model, "ignore_merges", false);
    tok->model_ = std::make_unique<BpeModel>(vocab, read_merges(model.at("merges"), what), options, what);

    // Normalizer and pre-tokenizer.
    tok->normalizer_ = Normalizer::from_json(root.value("normalizer", json()), what);
    PreTokenizerPlan plan;
    plan_pre_tokenizer(root.value("pre_tokenizer", json()), plan, what);
    if (!plan.byte_level)
      throw TokenizerError(what + ": only byte-level BPE is supported (pre_tokenizer has no ByteLevel step)");
    for (std::size_t i = 0; i < plan.patterns.size(); ++i)
      tok->splitters_.push_back(
          std::make_unique<RegexSplitter>(plan.patterns[i], what + " pre_tokenizer regex " + std::to_string(i)));

    // Post-processor and decoder.
    const json post = root.value("post_processor", json());
    if (!post.is_null() && post.value("type", "") != "ByteLevel")
      throw TokenizerError(what + ": post_processor type '" + post.value("type", "") + "' is not supported");
    const json decoder = root.value("decoder", json());
    if (!decoder.is_null() && decoder.value("type", "") != "ByteLevel")
      throw TokenizerError(what + ": decoder type '" + decoder.value("type", "") + "' is not supported");
    tok->byte_level_decoder_ = !decoder.is_null();

    // Added tokens: tokenizer.json's, then those only tokenizer_config.json lists (transformers
    // adds them at load, e.g. Qwen3.5's audio/TTS tokens 248070..248076).
    std::vector<AddedToken> added;
    std::set<std::string> contents;
    for (const auto& j : root.value("added_tokens", json::array())) {
      added.push_back(read_added_token(j, j.at("id").get<std::int32_t>()));
      contents.insert(added.back().content);
    }
    if (files.tokenizer_config && files.tokenizer_config->contains("added_tokens_decoder")) {
      std::vector<std::pair<std::int32_t, AddedToken>> extra;
      for (const auto& [key, j] : (*files.tokenizer_config)["added_tokens_decoder"].items()) {
        AddedToken t = read_added_token(j, std::stoi(key));
        if (!contents.count(t.content)) extra.emplace_back(t.id, t);
      }
      std::sort(extra.begin(), extra.end(), [](auto& a, auto& b) { return a.first < b.first; });
      for (auto& e : extra) {
        contents.insert(e.second.content);
        added.push_back(std::move(e.second));
      }
    }
    const Normalizer& normalizer = tok->normalizer_;
    tok->added_.build(std::move(added), [&](const std::string& s) { return normalizer.normalize(s); });
  } catch (const nlohmann::json::exception& e) {
    throw TokenizerError(what + ": unexpected tokenizer.json structure: " + e.what());
  }

  // Per-id decode table and vocabulary size (HF counts the union of model and added tokens).
  std::int32_t max_id = std::int32_t(tok->model_->vocab_size()) - 1;
  for (const AddedToken& t : tok->added_.tokens()) max_id = std::max(max_id, t.id);
  tok->id_bytes_.assign(std::size_t(max_id + 1), std::string());
  tok->id_special_.assign(std::size_t(max_id + 1), 0);
  std::size_t count = 0;
  for (std::int32_t id = 0; id <= max_id; ++id) {
    const AddedToken* added = tok->added_.find_by_id(id);
    const std::string* token = added ? &added->content : tok->model_->id_to_token(id);
    if (!token) continue;
    ++count;
    tok->id_bytes_[id] = tok->byte_level_decoder_ ? byte_level::decode_token(*token) : *token;
    tok->id_special_[id] = added && added->special;
  }
  tok->vocab_size_ = count;
  return tok;
}

}  // namespace fp4serve::tokenizer
