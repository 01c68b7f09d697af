#include "checkpoint/model_config.h"

#include <numeric>
#include <sstream>

#include "checkpoint/checkpoint_error.h"
#include "checkpoint/json_field.h"

namespace fp4serve {

std::string_view layer_kind_name(LayerKind kind) {
  return kind == LayerKind::kFullAttention ? "full_attention" : "linear_attention";
}

std::string_view model_layout_name(ModelLayout layout) {
  return layout == ModelLayout::kQwen3Next ? "qwen3_next" : "qwen3_5_moe";
}

namespace {

// Architectures we can serve, with the model_type each implies when model_type is absent.
struct KnownArch {
  std::string_view architecture;
  std::string_view model_type;
};
constexpr KnownArch kKnownArchs[] = {
    {"Qwen3_5MoeForConditionalGeneration", "qwen3_5_moe"},
    {"Qwen3_5MoeForCausalLM", "qwen3_5_moe_text"},
    {"Qwen3NextForCausalLM", "qwen3_next"},
};

int64_t required_int(const JsonField& obj, std::string_view key) { return obj.at(key).as_int(); }

void require_positive(const JsonField& obj, std::string_view key, int64_t value) {
  if (value <= 0)
    throw CheckpointError(obj.file(), (obj.path().empty() ? "" : obj.path() + ".") + std::string(key) +
                                          ": must be positive, got " + std::to_string(value));
}

// eos_token_id / bos_token_id may be null, an int, or (eos) a list of ints.
std::vector<int64_t> int_or_list(const JsonField& f) {
  if (f.is_array()) return f.as_int_list();
  return {f.as_int()};
}

// transformers' remap_legacy_layer_types plus the two names we serve.
LayerKind parse_layer_kind(const JsonField& f) {
  std::string s = f.as_string();
  if (s == "linear_attention" || s == "mamba") return LayerKind::kLinearAttention;
  if (s == "full_attention" || s == "attention") return LayerKind::kFullAttention;
  f.fail("unknown layer type '" + s + "' (expected linear_attention or full_attention)");
}

// Rope parameters, following PreTrainedConfig.convert_rope_params_to_dict: the legacy `rope_scaling`
// dict wins over `rope_parameters`; `rope_theta` and `partial_rotary_factor` fall back to the
// top-level fields, then to the defaults (10000, and 0.25 set by the Qwen3.5/Qwen3-Next configs).
void parse_rope(const JsonField& text, ModelConfig& c) {
  std::optional<JsonField> rope = text.find("rope_scaling");
  if (!rope) rope = text.find("rope_parameters");
  if (rope && !rope->is_object()) rope->fail("expected an object");

  auto pick = [&](std::string_view key) -> std::optional<JsonField> {
    if (rope) {
      if (auto f = rope->find(key)) return f;
    }
    return text.find(key);
  };
  if (auto f = pick("rope_theta")) c.rope_theta = f->as_double();
  if (auto f = pick("partial_rotary_factor")) c.partial_rotary_factor = f->as_double();

  if (rope) {
    std::optional<JsonField> type = rope->find("rope_type");
    if (!type) type = rope->find("type");
    if (type) {
      c.rope_type = type->as_string();
      if (c.rope_type == "mrope") c.rope_type = "default";  // Qwen2-VL era spelling
      if (c.rope_type != "default")
        type->fail("rope type '" + c.rope_type + "' is not supported (only 'default')");
    }
  }

  if (c.layout == ModelLayout::kQwen3_5Moe) {
    // Qwen3_5MoeTextRotaryEmbedding: mrope_section defaults to [11, 11, 10] and the sections are
    // always interleaved (apply_interleaved_mrope); the config flag is informational.
    c.mrope_section = {11, 11, 10};
    c.mrope_interleaved = true;
    if (auto f = pick("mrope_section")) c.mrope_section = f->as_int_list();
    if (auto f = pick("mrope_interleaved")) {
      if (!f->as_bool()) f->fail("false is not supported (transformers' Qwen3.5 always interleaves mRoPE)");
    }
  } else {
    c.mrope_section.clear();  // Qwen3-Next: plain 1-D RoPE
    c.mrope_interleaved = false;
  }

  if (!(c.rope_theta > 0.0)) text.fail("rope_theta must be positive");
  if (!(c.partial_rotary_factor > 0.0 && c.partial_rotary_factor <= 1.0))
    text.fail("partial_rotary_factor must be in (0, 1], got " + std::to_string(c.partial_rotary_factor));
}

void validate(const JsonField& text, const ModelConfig& c) {
  auto fail = [&](const std::string& what) { throw CheckpointError(text.file(), what); };
  const std::string p = text.path().empty() ? "" : text.path() + ".";

  if (c.num_attention_heads % c.num_key_value_heads != 0)
    fail(p + "num_attention_heads: " + std::to_string(c.num_attention_heads) +
         " is not a multiple of num_key_value_heads " + std::to_string(c.num_key_value_heads));
  if (c.linear_num_value_heads % c.linear_num_key_heads != 0)
    fail(p + "linear_num_value_heads: " + std::to_string(c.linear_num_value_heads) +
         " is not a multiple of linear_num_key_heads " + std::to_string(c.linear_num_key_heads));
  if (c.num_experts_per_tok > c.num_experts)
    fail(p + "num_experts_per_tok: " + std::to_string(c.num_experts_per_tok) + " exceeds num_experts " +
         std::to_string(c.num_experts));
  if (static_cast<int64_t>(c.layer_types.size()) != c.num_hidden_layers)
    fail(p + "layer_types: has " + std::to_string(c.layer_types.size()) + " entries but num_hidden_layers is " +
         std::to_string(c.num_hidden_layers));

  const int64_t rd = c.rotary_dim();
  if (rd <= 0 || rd % 2 != 0 || rd > c.head_dim)
    fail(p + "partial_rotary_factor: rotary dim " + std::to_string(rd) + " (head_dim " + std::to_string(c.head_dim) +
         ") must be even and in (0, head_dim]");
  if (!c.mrope_section.empty()) {
    int64_t sum = std::accumulate(c.mrope_section.begin(), c.mrope_section.end(), int64_t{0});
    if (sum != rd / 2)
      fail(p + "mrope_section: sums to " + std::to_string(sum) + " but rotary_dim/2 is " + std::to_string(rd / 2));
  }
  if (c.hidden_act != "silu") fail(p + "hidden_act: '" + c.hidden_act + "' is not supported (only silu)");
  if (!c.mlp_only_layers.empty())
    fail(p + "mlp_only_layers: dense MLP layers are not supported (every layer must be MoE)");
  if (c.decoder_sparse_step != 1)
    fail(p + "decoder_sparse_step: " + std::to_string(c.decoder_sparse_step) +
         " leaves dense MLP layers, which are not supported (must be 1)");
  if (c.mtp_num_hidden_layers < 0) fail(p + "mtp_num_hidden_layers: must not be negative");

  // Token ids are not checked against vocab_size: tiny test checkpoints (synth, HF's tiny-random
  // models) keep the real ids with a small vocabulary, and transformers accepts that.
}

}  // namespace

int64_t ModelConfig::num_full_attention_layers() const {
  int64_t n = 0;
  for (LayerKind k : layer_types) n += k == LayerKind::kFullAttention;
  return n;
}

int64_t ModelConfig::num_linear_attention_layers() const {
  return static_cast<int64_t>(layer_types.size()) - num_full_attention_layers();
}

std::vector<int64_t> ModelConfig::full_attention_layers() const {
  std::vector<int64_t> out;
  for (size_t i = 0; i < layer_types.size(); ++i)
    if (layer_types[i] == LayerKind::kFullAttention) out.push_back(static_cast<int64_t>(i));
  return out;
}

int64_t ModelConfig::rotary_dim() const {
  // transformers: dim = int(head_dim * partial_rotary_factor) (truncation).
  return static_cast<int64_t>(static_cast<double>(head_dim) * partial_rotary_factor);
}

std::string ModelConfig::layer_prefix(int64_t layer) const {
  return tensor_prefix + "layers." + std::to_string(layer) + ".";
}

ModelConfig ModelConfig::parse(std::string_view json_text, const std::string& file) {
  const CheckpointJson doc = parse_json_text(json_text, file);
  const JsonField root(doc, file, "");
  if (!root.is_object()) root.fail("expected a JSON object at the top level");

  ModelConfig c;
  if (auto archs = root.find("architectures")) {
    auto list = archs->as_string_list();
    if (!list.empty()) c.architecture = list.front();
  }
  if (auto mt = root.find("model_type")) {
    c.model_type = mt->as_string();
  } else {
    for (const auto& k : kKnownArchs)
      if (k.architecture == c.architecture) c.model_type = std::string(k.model_type);
    if (c.model_type.empty()) root.fail("model_type: missing (and architectures does not name a known model)");
  }

  // Where the text fields live, and the layout that follows from the model type.
  std::optional<JsonField> nested = root.find("text_config");
  JsonField text = root;
  if (c.model_type == "qwen3_5_moe") {
    if (!nested) root.fail("text_config: missing (model_type qwen3_5_moe keeps the text model's fields there)");
    if (!nested->is_object()) nested->fail("expected an object");
    text = *nested;
    c.layout = ModelLayout::kQwen3_5Moe;
    c.tensor_prefix = "model.language_model.";
    c.text_model_type = text.get_string("model_type", "qwen3_5_moe_text");
    if (c.text_model_type != "qwen3_5_moe_text")
      text.at("model_type").fail("expected 'qwen3_5_moe_text', got '" + c.text_model_type + "'");
  } else if (c.model_type == "qwen3_5_moe_text") {
    c.layout = ModelLayout::kQwen3_5Moe;
    c.tensor_prefix = "model.";  // Qwen3_5MoeForCausalLM: self.model = Qwen3_5MoeTextModel
    c.text_model_type = c.model_type;
  } else if (c.model_type == "qwen3_next") {
    c.layout = ModelLayout::kQwen3Next;
    c.tensor_prefix = "model.";
    c.text_model_type = c.model_type;
  } else {
    root.at("model_type").fail("'" + c.model_type +
                               "' is not supported (expected qwen3_5_moe, qwen3_5_moe_text or qwen3_next)");
  }

  // Shape-defining fields: required.
  c.hidden_size = required_int(text, "hidden_size");
  c.num_hidden_layers = required_int(text, "num_hidden_layers");
  c.num_attention_heads = required_int(text, "num_attention_heads");
  c.num_key_value_heads = required_int(text, "num_key_value_heads");
  c.vocab_size = required_int(text, "vocab_size");
  c.num_experts = required_int(text, "num_experts");
  c.num_experts_per_tok = required_int(text, "num_experts_per_tok");
  c.moe_intermediate_size = required_int(text, "moe_intermediate_size");

  // Fields with a transformers default (both config classes agree on these).
  c.head_dim = text.get_int("head_dim", 256);
  c.shared_expert_intermediate_size = text.get_int("shared_expert_intermediate_size", 512);
  c.linear_num_key_heads = text.get_int("linear_num_key_heads", 16);
  c.linear_num_value_heads = text.get_int("linear_num_value_heads", 32);
  c.linear_key_head_dim = text.get_int("linear_key_head_dim", 128);
  c.linear_value_head_dim = text.get_int("linear_value_head_dim", 128);
  c.linear_conv_kernel_dim = text.get_int("linear_conv_kernel_dim", 4);
  c.rms_norm_eps = text.get_double("rms_norm_eps", 1e-6);
  c.max_position_embeddings = text.get_int("max_position_embeddings", 32768);
  c.hidden_act = text.get_string("hidden_act", "silu");
  c.attention_bias = text.get_bool("attention_bias", false);
  c.mamba_ssm_dtype = text.get_string("mamba_ssm_dtype", "float32");
  // tie_word_embeddings: the nested text_config and the top level both carry it; the top level is
  // what PreTrainedModel ties by, so it wins when present.
  c.tie_word_embeddings = text.get_bool("tie_word_embeddings", false);
  if (nested) c.tie_word_embeddings = root.get_bool("tie_word_embeddings", c.tie_word_embeddings);

  if (auto f = text.find("attn_output_gate")) {
    if (!f->as_bool()) f->fail("false is not supported (transformers' Qwen3.5/Qwen3-Next attention is always gated)");
  }
  c.attn_output_gate = true;

  if (c.layout == ModelLayout::kQwen3Next) {
    c.norm_topk_prob = text.get_bool("norm_topk_prob", true);
    c.decoder_sparse_step = text.get_int("decoder_sparse_step", 1);
    if (auto f = text.find("mlp_only_layers")) c.mlp_only_layers = f->as_int_list();
  } else {
    c.norm_topk_prob = true;  // Qwen3.5's router always renormalises; HF reads no field
    if (auto f = text.find("norm_topk_prob")) {
      if (!f->as_bool()) f->fail("false is not supported (transformers' Qwen3.5 always renormalises the top-k)");
    }
  }

  for (auto [key, value] : {std::pair<std::string_view, int64_t>{"hidden_size", c.hidden_size},
                            {"num_hidden_layers", c.num_hidden_layers},
                            {"num_attention_heads", c.num_attention_heads},
                            {"num_key_value_heads", c.num_key_value_heads},
                            {"vocab_size", c.vocab_size},
                            {"num_experts", c.num_experts},
                            {"num_experts_per_tok", c.num_experts_per_tok},
                            {"moe_intermediate_size", c.moe_intermediate_size},
                            {"head_dim", c.head_dim},
                            {"shared_expert_intermediate_size", c.shared_expert_intermediate_size},
                            {"linear_num_key_heads", c.linear_num_key_heads},
                            {"linear_num_value_heads", c.linear_num_value_heads},
                            {"linear_key_head_dim", c.linear_key_head_dim},
                            {"linear_value_head_dim", c.linear_value_head_dim},
                            {"linear_conv_kernel_dim", c.linear_conv_kernel_dim},
                            {"max_position_embeddings", c.max_position_embeddings}})
    require_positive(text, key, value);
  if (!(c.rms_norm_eps > 0.0)) text.at("rms_norm_eps").fail("must be positive");

  // Layer schedule.
  if (auto f = text.find("full_attention_interval")) {
    c.full_attention_interval = f->as_int();
    if (c.full_attention_interval < 1) f->fail("must be at least 1");
  }
  if (auto f = text.find("layer_types")) {
    for (const auto& e : f->as_array()) c.layer_types.push_back(parse_layer_kind(e));
  } else {
    for (int64_t i = 0; i < c.num_hidden_layers; ++i)
      c.layer_types.push_back((i + 1) % c.full_attention_interval == 0 ? LayerKind::kFullAttention
                                                                        : LayerKind::kLinearAttention);
  }

  parse_rope(text, c);

  // Special tokens: the text config first, then the top level (3.5 puts eos only in text_config).
  auto token = [&](std::string_view key) -> std::optional<JsonField> {
    if (auto f = text.find(key)) return f;
    if (nested) return root.find(key);
    return std::nullopt;
  };
  if (auto f = token("bos_token_id")) c.bos_token_id = f->as_int();
  if (auto f = token("pad_token_id")) c.pad_token_id = f->as_int();
  if (auto f = token("eos_token_id")) c.eos_token_ids = int_or_list(*f);

  c.mtp_num_hidden_layers = text.get_int("mtp_num_hidden_layers", 0);
  c.mtp_use_dedicated_embeddings = text.get_bool("mtp_use_dedicated_embeddings", false);

  if (nested) {
    if (auto f = root.find("image_token_id")) c.image_token_id = f->as_int();
    if (auto f = root.find("video_token_id")) c.video_token_id = f->as_int();
    c.has_vision_config = root.has("vision_config");
  }
  if (auto f = text.find("dtype")) c.torch_dtype = f->as_string();
  else if (auto g = text.find("torch_dtype")) c.torch_dtype = g->as_string();
  else if (auto h = root.find("dtype")) c.torch_dtype = h->as_string();
  else if (auto k = root.find("torch_dtype")) c.torch_dtype = k->as_string();

  validate(text, c);
  return c;
}

ModelConfig ModelConfig::load(const std::filesystem::path& model_dir) {
  const auto path = model_dir / "config.json";
  return parse(read_text_file(path), path.string());
}

std::string ModelConfig::describe() const {
  std::ostringstream o;
  o << "model: " << (architecture.empty() ? model_type : architecture) << " (" << model_layout_name(layout)
    << " layout, tensors under '" << tensor_prefix << "')\n";
  o << "  layers: " << num_hidden_layers << " (" << num_linear_attention_layers() << " gated-deltanet + "
    << num_full_attention_layers() << " full attention), hidden " << hidden_size << ", vocab " << vocab_size
    << (tie_word_embeddings ? ", tied lm_head" : ", untied lm_head") << "\n";
  o << "  attention: " << num_attention_heads << " q heads / " << num_key_value_heads << " kv heads x " << head_dim
    << (attn_output_gate ? ", output gate" : "") << ", rope theta " << rope_theta << " on " << rotary_dim()
    << " dims";
  if (!mrope_section.empty()) {
    o << ", mrope [";
    for (size_t i = 0; i < mrope_section.size(); ++i) o << (i ? "," : "") << mrope_section[i];
    o << "]" << (mrope_interleaved ? " interleaved" : "");
  }
  o << ", max positions " << max_position_embeddings << "\n";
  o << "  gated deltanet: " << linear_num_key_heads << " qk heads x " << linear_key_head_dim << ", "
    << linear_num_value_heads << " v heads x " << linear_value_head_dim << ", conv " << linear_conv_kernel_dim
    << "\n";
  o << "  moe: " << num_experts << " experts, top " << num_experts_per_tok << (norm_topk_prob ? " (renormalised)" : "")
    << ", expert width " << moe_intermediate_size << ", shared expert width " << shared_expert_intermediate_size
    << "\n";
  o << "  mtp layers: " << mtp_num_hidden_layers << ", rms_norm_eps " << rms_norm_eps;
  if (!torch_dtype.empty()) o << ", dtype " << torch_dtype;
  o << "\n";
  return o.str();
}

}  // namespace fp4serve
