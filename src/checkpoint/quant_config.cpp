#include "checkpoint/quant_config.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <map>
#include <regex>
#include <sstream>
#include <unordered_map>

#include "checkpoint/checkpoint_error.h"
#include "checkpoint/json_field.h"
#include "checkpoint/module_pattern.h"

namespace fp4serve {

std::string_view quant_method_name(QuantMethod method) {
  switch (method) {
    case QuantMethod::kNone: return "none";
    case QuantMethod::kModelOpt: return "modelopt";
    case QuantMethod::kFp8: return "fp8";
    case QuantMethod::kAutoRound: return "auto-round";
    case QuantMethod::kGptq: return "gptq";
  }
  return "unknown";
}

namespace {

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string_view last_component(std::string_view path) {
  size_t dot = path.rfind('.');
  return dot == std::string_view::npos ? path : path.substr(dot + 1);
}

// Modules that are bf16 whatever the config says. Embeddings, the GDN depthwise conv and the norms
// are not Linear layers, so no producer quantizes them. The MoE router (`mlp.gate`) and
// `shared_expert_gate` are Linear, but vLLM's Qwen3-Next / Qwen3.5 blocks build both as
// ReplicatedLinear(quant_config=None) (qwen3_next.py Qwen3NextSparseMoeBlock), so a checkpoint that
// quantized them could not be served by vLLM either; every release keeps them dense.
bool never_quantized(std::string_view path) {
  std::string_view leaf = last_component(path);
  if (leaf == "embed_tokens" || leaf == "conv1d" || leaf == "pos_embed") return true;
  if (leaf == "shared_expert_gate") return true;
  if (leaf == "gate" && (path == "mlp.gate" || (path.size() > 9 && path.substr(path.size() - 9) == ".mlp.gate")))
    return true;
  return leaf.find("norm") != std::string_view::npos;  // *_layernorm, q_norm, pre_fc_norm_hidden, ...
}

// The vision tower (model.visual.*) is never quantized by the recipes we load; vLLM treats a
// "visual" / "vision_tower" / "vision_model" component as excluded for ModelOpt as well.
bool is_vision_module(std::string_view path) {
  return contains_components(path, "visual") || contains_components(path, "vision_tower") ||
         contains_components(path, "vision_model");
}

// An AutoRound extra_config key is a regex only if it has regex syntax beyond dots (every module name
// has dots, and a literal name must keep matching only itself).
bool looks_like_regex(std::string_view key) {
  return key.find_first_of("*+?[](){}|^$\\") != std::string_view::npos;
}

std::regex compile_regex(const JsonField& where, const std::string& pattern) {
  try {
    return std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    where.fail("invalid regular expression '" + pattern + "': " + e.what());
  }
}

// Per-module override of the INT4 parameters (AutoRound extra_config, GPTQ dynamic).
struct Int4Override {
  std::optional<int> bits;
  std::optional<int> group_size;
  std::optional<bool> sym;
  std::optional<bool> desc_act;
};

Int4Override parse_int4_override(const JsonField& obj, bool allow_desc_act) {
  if (!obj.is_object()) obj.fail("expected an object of overrides");
  Int4Override o;
  if (auto f = obj.find("bits")) {
    o.bits = static_cast<int>(f->as_int());
    if (*o.bits != 4 && *o.bits < 16)
      f->fail(std::to_string(*o.bits) + "-bit weights are not supported (4, or 16 for unquantized)");
  }
  if (auto f = obj.find("group_size")) o.group_size = static_cast<int>(f->as_int());
  if (auto f = obj.find("sym")) o.sym = f->as_bool();
  if (allow_desc_act) {
    if (auto f = obj.find("desc_act")) o.desc_act = f->as_bool();
  }
  if (auto f = obj.find("data_type")) {
    std::string dt = lower(f->as_string());
    bool quantized = !o.bits || *o.bits < 16;
    if (quantized && dt != "int") f->fail("data_type '" + dt + "' is not supported for quantized layers (int)");
  }
  return o;
}

void check_group_size(const JsonField& where, int group_size) {
  if (group_size != -1 && (group_size <= 0 || group_size % 8 != 0))
    where.fail("group_size " + std::to_string(group_size) + " is not supported (-1 or a positive multiple of 8)");
}

}  // namespace

struct QuantConfig::Rules {
  QuantMethod method = QuantMethod::kNone;
  std::string algo;
  std::string source;
  KvCacheQuant kv = KvCacheQuant::kNone;
  WeightFormat base;             // format of a quantized module without an override
  std::string file;              // for messages raised at lookup time

  // modelopt
  std::vector<std::string> exclude_wildcards;              // exclude_modules / ignore
  bool mixed = false;
  std::unordered_map<std::string, WeightFormat> quantized_layers;  // MIXED_PRECISION
  std::map<std::string, WeightFormat> quantized_layers_sorted;     // for prefix scans

  // fp8
  std::vector<std::string> not_converted;  // modules_to_not_convert

  // auto-round
  std::vector<std::string> block_names;  // block_name_to_quantize
  std::unordered_map<std::string, Int4Override> extra_exact;
  std::map<std::string, Int4Override> extra_sorted;
  std::vector<std::pair<std::regex, Int4Override>> extra_regex;

  // gptq
  bool lm_head_quantized = false;
  std::vector<std::string> modules_in_block;
  struct DynamicRule {
    std::string pattern;
    std::regex re;
    bool negative;
    Int4Override overrides;
  };
  std::vector<DynamicRule> dynamic;

  WeightFormat apply(const Int4Override& o) const {
    if (o.bits && *o.bits >= 16) return WeightFormat::bf16();
    return WeightFormat::int4_gptq(o.group_size.value_or(base.group_size), o.sym.value_or(base.sym),
                                   o.desc_act.value_or(base.desc_act), base.zero_convention);
  }

  bool modelopt_excluded(std::string_view path) const {
    for (const std::string& spelling : module_path_spellings(path)) {
      for (const std::string& pattern : exclude_wildcards) {
        // `name*` excludes the subtree rooted at name (ModelOpt's summary); fnmatch covers it. A plain
        // name excludes that module and everything inside it.
        if (fnmatch_case(spelling, pattern) || is_within(spelling, pattern)) return true;
      }
    }
    return is_vision_module(path);
  }

  WeightFormat modelopt_format(std::string_view path) const {
    if (modelopt_excluded(path)) return WeightFormat::bf16();
    if (!mixed) return base;
    const auto spellings = module_path_spellings(path);
    // 1. The module itself.
    for (const auto& s : spellings)
      if (auto it = quantized_layers.find(s); it != quantized_layers.end()) return it->second;
    // 2. An ancestor entry: a per-expert path under the aggregate "...mlp.experts" key.
    for (const auto& s : spellings) {
      std::string_view p = s;
      for (size_t dot = p.rfind('.'); dot != std::string_view::npos; dot = p.rfind('.')) {
        p = p.substr(0, dot);
        if (auto it = quantized_layers.find(std::string(p)); it != quantized_layers.end()) return it->second;
      }
    }
    // 3. Entries inside the module: the aggregate experts asked about when the config lists experts
    //    one by one. They must agree, as vLLM requires of a fused module.
    for (const auto& s : spellings) {
      std::optional<WeightFormat> found;
      std::string first_key;
      for (auto it = quantized_layers_sorted.lower_bound(s + "."); it != quantized_layers_sorted.end(); ++it) {
        if (!is_within(it->first, s)) break;
        if (!found) {
          found = it->second;
          first_key = it->first;
        } else if (!(*found == it->second)) {
          throw CheckpointError(file, "quantized_layers: modules inside " + s + " use different formats (" +
                                          first_key + ": " + found->name() + ", " + it->first + ": " +
                                          it->second.name() + ")");
        }
      }
      if (found) return *found;
    }
    return WeightFormat::bf16();  // not listed => unquantized (vLLM: UnquantizedLinearMethod)
  }

  WeightFormat fp8_format(std::string_view path) const {
    // lm_head is never block-FP8: transformers adds the output embedding to modules_to_not_convert and
    // vLLM's Fp8Config gives ParallelLMHead no quant method.
    if (path == "lm_head") return WeightFormat::bf16();
    for (const std::string& spelling : module_path_spellings(path))
      for (const std::string& name : not_converted)
        if (contains_components(spelling, name)) return WeightFormat::bf16();
    return base;
  }

  std::optional<Int4Override> autoround_lookup(const std::string& s) const {
    if (auto it = extra_exact.find(s); it != extra_exact.end()) return it->second;
    for (const auto& [re, o] : extra_regex)
      if (std::regex_match(s, re)) return o;
    return std::nullopt;
  }

  WeightFormat autoround_format(std::string_view path) const {
    const auto spellings = module_path_spellings(path);
    // 1. An override naming this module (or, for a per-expert path, its experts container).
    for (const auto& s : spellings) {
      if (auto o = autoround_lookup(s)) return apply(*o);
    }
    // 2. Quantized at all? lm_head is not unless named; block_name_to_quantize restricts to blocks.
    bool quantized = path != "lm_head";
    if (!block_names.empty()) {
      quantized = false;
      for (const auto& s : spellings)
        for (const auto& b : block_names)
          if (s.compare(0, b.size(), b) == 0) quantized = true;
    }
    // 3. A container (fused experts) asked about while overrides name its members: they must agree.
    for (const auto& s : spellings) {
      std::optional<WeightFormat> found;
      for (auto it = extra_sorted.lower_bound(s + "."); it != extra_sorted.end(); ++it) {
        if (!is_within(it->first, s)) break;
        WeightFormat f = apply(it->second);
        if (!quantized && !it->second.bits) f = WeightFormat::bf16();
        if (found && !(*found == f))
          throw CheckpointError(file, "extra_config: modules inside " + s + " use different formats");
        found = f;
      }
      if (found) return *found;
    }
    // 4. An override on an ancestor (e.g. "...mlp.experts" for "...mlp.experts.7.up_proj").
    for (const auto& s : spellings) {
      std::string_view p = s;
      for (size_t dot = p.rfind('.'); dot != std::string_view::npos; dot = p.rfind('.')) {
        p = p.substr(0, dot);
        if (auto o = autoround_lookup(std::string(p))) return apply(*o);
      }
    }
    return quantized ? base : WeightFormat::bf16();
  }

  WeightFormat gptq_format(std::string_view path) const {
    if (path == "lm_head" && !lm_head_quantized) return WeightFormat::bf16();
    if (!modules_in_block.empty() && path != "lm_head") {
      bool listed = false;
      for (const auto& m : modules_in_block) listed = listed || contains_components(path, m);
      if (!listed) return WeightFormat::bf16();
    }
    const std::string p(path);
    for (const auto& rule : dynamic) {
      if (!std::regex_search(p, rule.re, std::regex_constants::match_continuous)) continue;
      if (rule.negative) return WeightFormat::bf16();
      return apply(rule.overrides);
    }
    return base;
  }
};

namespace {

using Rules = QuantConfig::Rules;

WeightFormat modelopt_algo_format(const JsonField& where, const std::string& algo, std::optional<int64_t> group_size) {
  auto nvfp4_group = [&]() {
    int64_t g = group_size.value_or(16);
    if (g != 16) where.fail("NVFP4 group_size " + std::to_string(g) + " is not supported (16)");
    return static_cast<int>(g);
  };
  if (algo == "FP8") return WeightFormat::fp8_per_tensor(/*static_activation_scale=*/true);
  if (algo == "NVFP4") return WeightFormat::nvfp4(nvfp4_group(), /*w4a4=*/true);
  if (algo == "W4A16_NVFP4") return WeightFormat::nvfp4(nvfp4_group(), /*w4a4=*/false);
  where.fail("ModelOpt quant_algo '" + algo + "' is not supported (FP8, NVFP4, W4A16_NVFP4, MIXED_PRECISION)");
}

KvCacheQuant parse_kv_algo(const JsonField& f) {
  std::string algo = upper(f.as_string());
  if (algo == "FP8") return KvCacheQuant::kFP8;
  if (algo == "NONE" || algo.empty()) return KvCacheQuant::kNone;
  f.fail("KV cache quantization '" + algo + "' is not supported (FP8)");
}

// ModelOpt, either shape: the legacy {"quantization": {...}} (hf_quant_config.json) or the flat
// config.json form written by convert_hf_quant_config_format.
void parse_modelopt(const JsonField& section, Rules& r) {
  r.method = QuantMethod::kModelOpt;
  JsonField q = section;
  bool legacy = false;
  if (auto inner = section.find("quantization")) {
    q = *inner;
    legacy = true;
  }
  JsonField algo_field = q.at("quant_algo");
  r.algo = upper(algo_field.as_string());

  std::optional<int64_t> group_size;
  if (auto f = q.find("group_size")) group_size = f->as_int();

  // The legacy file calls the list exclude_modules, config.json calls it ignore; accept either.
  const std::array<const char*, 2> keys = legacy ? std::array<const char*, 2>{"exclude_modules", "ignore"}
                                                 : std::array<const char*, 2>{"ignore", "exclude_modules"};
  for (const char* key : keys) {
    if (auto f = q.find(key)) {
      r.exclude_wildcards = f->as_string_list();
      break;
    }
  }

  if (auto f = q.find("kv_cache_quant_algo")) r.kv = parse_kv_algo(*f);
  if (auto f = q.find("kv_cache_scheme")) {
    std::string type = lower(f->get_string("type", "float"));
    int64_t bits = f->get_int("num_bits", 8);
    if (type != "float" || bits != 8)
      f->fail("KV cache scheme " + type + "/" + std::to_string(bits) + " bits is not supported (float 8-bit)");
    r.kv = KvCacheQuant::kFP8;
  }

  if (r.algo == "MIXED_PRECISION") {
    r.mixed = true;
    for (const auto& [name, entry] : q.at("quantized_layers").members()) {
      std::string algo = upper(entry.at("quant_algo").as_string());
      std::optional<int64_t> gs;
      if (auto g = entry.find("group_size")) gs = g->as_int();
      WeightFormat f = modelopt_algo_format(entry.at("quant_algo"), algo, gs);
      r.quantized_layers.emplace(name, f);
      r.quantized_layers_sorted.emplace(name, f);
    }
    r.base = WeightFormat::bf16();
  } else {
    r.base = modelopt_algo_format(algo_field, r.algo, group_size);
  }
}

void parse_fp8(const JsonField& q, Rules& r) {
  r.method = QuantMethod::kFp8;
  std::string fmt = lower(q.get_string("fmt", "e4m3"));
  if (fmt != "e4m3") q.at("fmt").fail("FP8 format '" + fmt + "' is not supported (e4m3)");
  std::string scheme = lower(q.get_string("activation_scheme", "dynamic"));
  if (scheme != "dynamic" && scheme != "static")
    q.at("activation_scheme").fail("unknown activation_scheme '" + scheme + "' (dynamic or static)");
  if (auto f = q.find("weight_block_size")) {
    auto block = f->as_int_list();
    if (block.size() != 2 || block[0] <= 0 || block[1] <= 0) f->fail("expected two positive integers");
    if (scheme != "dynamic") q.at("activation_scheme").fail("static activation scales with block FP8 are not supported");
    r.base = WeightFormat::fp8_block(static_cast<int>(block[0]), static_cast<int>(block[1]));
    r.algo = "FP8_BLOCK";
  } else {
    r.base = WeightFormat::fp8_per_tensor(scheme == "static");
    r.algo = "FP8";
  }
  for (const char* key : {"modules_to_not_convert", "ignored_layers"})
    if (auto f = q.find(key)) {
      auto names = f->as_string_list();
      r.not_converted.insert(r.not_converted.end(), names.begin(), names.end());
    }
}

void parse_autoround(const JsonField& q, Rules& r) {
  r.method = QuantMethod::kAutoRound;
  r.algo = "AUTO-ROUND";
  const int bits = static_cast<int>(q.at("bits").as_int());
  if (bits != 4) q.at("bits").fail(std::to_string(bits) + "-bit AutoRound weights are not supported (4)");
  const int group_size = static_cast<int>(q.at("group_size").as_int());
  check_group_size(q.at("group_size"), group_size);
  const bool sym = q.get_bool("sym", true);
  std::string packing = q.get_string("packing_format", "auto_round:auto_gptq");
  if (packing != "auto_round:auto_gptq")
    q.at("packing_format").fail("packing format '" + packing + "' is not supported (auto_round:auto_gptq)");
  std::string data_type = lower(q.get_string("data_type", "int"));
  if (data_type != "int") q.at("data_type").fail("data_type '" + data_type + "' is not supported (int)");
  // The auto_gptq packing stores qzeros as zero - 1; only asymmetric checkpoints read them.
  r.base = WeightFormat::int4_gptq(group_size, sym, /*desc_act=*/false, Int4ZeroConvention::kV1MinusOne);

  std::optional<JsonField> blocks = q.find("block_name_to_quantize");
  if (!blocks) blocks = q.find("to_quant_block_names");
  if (blocks) {
    if (blocks->json().is_string()) {
      std::string s = blocks->as_string();
      size_t start = 0;
      while (start <= s.size()) {
        size_t comma = s.find(',', start);
        std::string name = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (!name.empty()) r.block_names.push_back(name);
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    } else {
      // A list of names, or (multimodal exports) a list of lists of names.
      for (const auto& e : blocks->as_array()) {
        if (e.is_array()) {
          for (auto& n : e.as_string_list()) r.block_names.push_back(n);
        } else {
          r.block_names.push_back(e.as_string());
        }
      }
    }
  }

  if (auto extra = q.find("extra_config")) {
    for (const auto& [name, entry] : extra->members()) {
      Int4Override o = parse_int4_override(entry, /*allow_desc_act=*/false);
      if (o.group_size) check_group_size(entry.at("group_size"), *o.group_size);
      if (looks_like_regex(name)) {
        r.extra_regex.emplace_back(compile_regex(entry, name), o);
      } else {
        r.extra_exact.emplace(name, o);
        r.extra_sorted.emplace(name, o);
      }
    }
  }
}

void parse_gptq(const JsonField& q, Rules& r) {
  r.method = QuantMethod::kGptq;
  r.algo = "GPTQ";
  const int bits = static_cast<int>(q.at("bits").as_int());
  if (bits != 4) q.at("bits").fail(std::to_string(bits) + "-bit GPTQ weights are not supported (4)");
  const int group_size = static_cast<int>(q.at("group_size").as_int());
  check_group_size(q.at("group_size"), group_size);
  const bool sym = q.get_bool("sym", true);
  const bool desc_act = q.get_bool("desc_act", false);
  std::optional<JsonField> fmt_field = q.find("checkpoint_format");
  if (!fmt_field) fmt_field = q.find("format");
  std::string fmt = fmt_field ? lower(fmt_field->as_string()) : "gptq";
  Int4ZeroConvention zeros;
  if (fmt == "gptq") zeros = Int4ZeroConvention::kV1MinusOne;
  else if (fmt == "gptq_v2") zeros = Int4ZeroConvention::kV2;
  else fmt_field->fail("checkpoint format '" + fmt + "' is not supported (gptq, gptq_v2)");
  r.base = WeightFormat::int4_gptq(group_size, sym, desc_act, zeros);
  r.lm_head_quantized = q.get_bool("lm_head", false);

  if (auto m = q.find("modules_in_block_to_quantize")) {
    for (const auto& e : m->as_array()) {
      if (e.is_array()) {
        for (auto& n : e.as_string_list()) r.modules_in_block.push_back(n);
      } else {
        r.modules_in_block.push_back(e.as_string());
      }
    }
  }
  if (auto dyn = q.find("dynamic")) {
    for (const auto& [key, entry] : dyn->members()) {
      Rules::DynamicRule rule;
      rule.negative = key.rfind("-:", 0) == 0;
      rule.pattern = key.rfind("-:", 0) == 0 || key.rfind("+:", 0) == 0 ? key.substr(2) : key;
      rule.re = compile_regex(entry, rule.pattern);
      rule.overrides = parse_int4_override(entry, /*allow_desc_act=*/true);
      if (rule.overrides.group_size) check_group_size(entry.at("group_size"), *rule.overrides.group_size);
      r.dynamic.push_back(std::move(rule));
    }
  }
}

void parse_section(const JsonField& q, Rules& r) {
  if (!q.is_object()) q.fail("expected an object");
  std::string method;
  if (auto f = q.find("quant_method")) {
    method = lower(f->as_string());
  } else if (q.has("quant_algo") || q.has("quantization")) {
    method = "modelopt";  // ModelOpt's own shapes need no quant_method
  } else {
    q.fail("quant_method: missing");
  }
  if (method == "modelopt") parse_modelopt(q, r);
  else if (method == "fp8") parse_fp8(q, r);
  else if (method == "auto-round" || method == "auto_round" || method == "intel/auto-round") parse_autoround(q, r);
  else if (method == "gptq") parse_gptq(q, r);
  else
    q.at("quant_method").fail("unknown quantization method '" + method +
                              "' (supported: modelopt, fp8, auto-round, gptq)");
}

}  // namespace

QuantConfig::QuantConfig() : rules_(std::make_unique<Rules>()) {}
QuantConfig::~QuantConfig() = default;
QuantConfig::QuantConfig(const QuantConfig& o) : rules_(std::make_unique<Rules>(*o.rules_)) {}
QuantConfig& QuantConfig::operator=(const QuantConfig& o) {
  if (this != &o) rules_ = std::make_unique<Rules>(*o.rules_);
  return *this;
}
QuantConfig::QuantConfig(QuantConfig&&) noexcept = default;
QuantConfig& QuantConfig::operator=(QuantConfig&&) noexcept = default;

QuantConfig QuantConfig::parse(std::string_view config_json, std::optional<std::string_view> hf_quant_config_json,
                               const std::string& config_file, const std::string& hf_quant_file) {
  QuantConfig out;
  Rules& r = *out.rules_;
  const CheckpointJson doc = parse_json_text(config_json, config_file);
  const JsonField root(doc, config_file, "");
  if (!root.is_object()) root.fail("expected a JSON object at the top level");

  std::optional<JsonField> section = root.find("quantization_config");
  if (!section) {
    if (auto text = root.find("text_config"); text && text->is_object()) section = text->find("quantization_config");
  }
  if (section) {
    r.file = config_file;
    r.source = config_file + ": " + section->path();
    parse_section(*section, r);
    // The published NVFP4 release's config.json carries no kv_cache_scheme; its FP8 KV cache is
    // declared only in hf_quant_config.json (kv_cache_quant_algo), so read it from there too.
    if (r.kv == KvCacheQuant::kNone && hf_quant_config_json) {
      const CheckpointJson hf = parse_json_text(*hf_quant_config_json, hf_quant_file);
      const JsonField hroot(hf, hf_quant_file, "");
      if (auto q = hroot.find("quantization"); q && q->is_object()) {
        if (auto f = q->find("kv_cache_quant_algo")) r.kv = parse_kv_algo(*f);
      }
    }
    return out;
  }
  if (hf_quant_config_json) {
    const CheckpointJson hf = parse_json_text(*hf_quant_config_json, hf_quant_file);
    const JsonField hroot(hf, hf_quant_file, "");
    if (!hroot.is_object()) hroot.fail("expected a JSON object at the top level");
    r.file = hf_quant_file;
    r.source = hf_quant_file + ": quantization";
    hroot.at("quantization");  // the legacy file always has it; say so if not
    parse_modelopt(hroot, r);
  }
  return out;
}

QuantConfig QuantConfig::parse_standalone(std::string_view quantization_config_json, const std::string& file) {
  QuantConfig out;
  Rules& r = *out.rules_;
  const CheckpointJson doc = parse_json_text(quantization_config_json, file);
  const JsonField root(doc, file, "");
  r.file = file;
  r.source = file;
  parse_section(root, r);
  return out;
}

QuantConfig QuantConfig::load(const std::filesystem::path& model_dir) {
  const auto config_path = model_dir / "config.json";
  const auto hf_path = model_dir / "hf_quant_config.json";
  const auto standalone_path = model_dir / "quantization_config.json";
  const std::string config_text = read_text_file(config_path);
  std::optional<std::string> hf_text;
  std::error_code ec;
  if (std::filesystem::exists(hf_path, ec)) hf_text = read_text_file(hf_path);
  std::optional<std::string_view> hf_view;
  if (hf_text) hf_view = *hf_text;
  QuantConfig q = parse(config_text, hf_view, config_path.string(), hf_path.string());
  if (!q.is_quantized() && std::filesystem::exists(standalone_path, ec))
    return parse_standalone(read_text_file(standalone_path), standalone_path.string());
  return q;
}

QuantMethod QuantConfig::method() const { return rules_->method; }
const std::string& QuantConfig::algo() const { return rules_->algo; }
const std::string& QuantConfig::source() const { return rules_->source; }
KvCacheQuant QuantConfig::kv_cache() const { return rules_->kv; }
WeightFormat QuantConfig::default_format() const { return rules_->base; }

WeightFormat QuantConfig::format_for(std::string_view module_path) const {
  if (rules_->method == QuantMethod::kNone || never_quantized(module_path)) return WeightFormat::bf16();
  switch (rules_->method) {
    case QuantMethod::kModelOpt: return rules_->modelopt_format(module_path);
    case QuantMethod::kFp8: return rules_->fp8_format(module_path);
    case QuantMethod::kAutoRound: return rules_->autoround_format(module_path);
    case QuantMethod::kGptq: return rules_->gptq_format(module_path);
    case QuantMethod::kNone: break;
  }
  return WeightFormat::bf16();
}

std::string QuantConfig::describe() const {
  const Rules& r = *rules_;
  std::ostringstream o;
  if (r.method == QuantMethod::kNone) {
    o << "quantization: none (unquantized checkpoint)\n";
    return o.str();
  }
  o << "quantization: " << quant_method_name(r.method);
  if (upper(std::string(quant_method_name(r.method))) != r.algo) o << " " << r.algo;
  o << " (from " << r.source << ")\n";
  o << "  kv cache: " << (r.kv == KvCacheQuant::kFP8 ? "fp8_e4m3" : "not quantized by the checkpoint") << "\n";
  if (r.mixed) {
    std::map<std::string, int> counts;
    for (const auto& [name, f] : r.quantized_layers) counts[f.name()]++;
    o << "  quantized_layers: " << r.quantized_layers.size() << " modules (";
    bool first = true;
    for (const auto& [name, n] : counts) {
      o << (first ? "" : ", ") << n << " " << name;
      first = false;
    }
    o << "); anything else bf16\n";
  } else {
    o << "  default format: " << r.base.name() << "\n";
  }
  auto list = [&](const char* label, const std::vector<std::string>& v) {
    if (v.empty()) return;
    o << "  " << label << " (" << v.size() << "): ";
    for (size_t i = 0; i < v.size() && i < 6; ++i) o << (i ? ", " : "") << v[i];
    if (v.size() > 6) o << ", ...";
    o << "\n";
  };
  list("excluded", r.exclude_wildcards);
  list("not converted", r.not_converted);
  list("blocks quantized", r.block_names);
  list("modules in block", r.modules_in_block);
  if (!r.extra_exact.empty() || !r.extra_regex.empty())
    o << "  per-module overrides: " << r.extra_exact.size() + r.extra_regex.size() << "\n";
  if (!r.dynamic.empty()) {
    o << "  dynamic rules (" << r.dynamic.size() << "): ";
    for (size_t i = 0; i < r.dynamic.size() && i < 6; ++i)
      o << (i ? ", " : "") << (r.dynamic[i].negative ? "-:" : "+:") << r.dynamic[i].pattern;
    if (r.dynamic.size() > 6) o << ", ...";
    o << "\n";
  }
  if (r.method == QuantMethod::kGptq) o << "  lm_head " << (r.lm_head_quantized ? "quantized" : "bf16") << "\n";
  return o.str();
}

}  // namespace fp4serve
