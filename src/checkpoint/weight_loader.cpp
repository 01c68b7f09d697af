#include "checkpoint/weight_loader.h"

#include <sys/mman.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <unordered_set>

#include "checkpoint/checkpoint_error.h"
#include "checkpoint/model_locator.h"
#include "checkpoint/progress.h"

namespace fp4serve {
namespace {

std::string shape_str(const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

std::string expected_str(const PlannedTensor& t) {
  return fmt::format("{} {}", dtype_name(t.dtype), shape_str(t.shape));
}

// A scalar may be stored as [] or [1]; both mean one value.
bool same_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  if (a == b) return true;
  auto is_scalar = [](const std::vector<int64_t>& s) { return s.empty() || (s.size() == 1 && s[0] == 1); };
  return is_scalar(a) && is_scalar(b);
}

float read_f32_scalar(const ShardedCheckpoint& files, const std::string& name) {
  auto e = files.find(name);
  if (!e.info || e.info->dtype != DType::kF32 || e.info->byte_size != 4) return 0.0f;
  float v;
  std::memcpy(&v, files.bytes(name).data(), 4);
  return v;
}

// docs/quant-formats.md §3.4: gate and up of one expert are fused at load and must share one
// weight_scale_2; ModelOpt guarantees it, and a checkpoint that breaks it would decode garbage.
void check_nvfp4_expert_scales(const ShardedCheckpoint& files, const PlannedModule& m,
                               std::vector<std::string>& problems) {
  if (m.kind != ModuleKind::kRoutedExperts || m.format.kind != WeightFormatKind::kNVFP4 || m.num_experts == 0) return;
  if (!files.contains(m.path + ".0.gate_proj.weight_scale_2")) return;  // reported as missing already
  for (int64_t e = 0; e < m.num_experts; ++e) {
    const std::string p = m.path + "." + std::to_string(e) + ".";
    const float g = read_f32_scalar(files, p + "gate_proj.weight_scale_2");
    const float u = read_f32_scalar(files, p + "up_proj.weight_scale_2");
    if (g != u) {
      problems.push_back(fmt::format("unequal NVFP4 global scales: {}gate_proj.weight_scale_2 = {} but "
                                     "up_proj.weight_scale_2 = {} (gate and up are fused and must share one)",
                                     p, g, u));
    }
  }
}

bool is_scale_tensor(std::string_view name) {
  for (std::string_view suffix : {".weight_scale", ".weight_scale_inv", ".weight_scale_2", ".input_scale", ".k_scale",
                                  ".v_scale"}) {
    if (name.size() >= suffix.size() && name.substr(name.size() - suffix.size()) == suffix) return true;
  }
  return false;
}

// A scale that is NaN or infinite decodes every weight or activation it covers to NaN: the model then
// answers garbage (or NaN logits) without any error. e4m3 has no infinity; its NaN is S.1111.111.
// Zero scales are legitimate (an all-zero block or row).
void check_scale_values(const ShardedCheckpoint& files, const PlannedTensor& t, std::vector<std::string>& problems) {
  if (!is_scale_tensor(t.name)) return;
  auto e = files.find(t.name);
  if (!e.info || e.info->dtype != t.dtype) return;  // missing / wrong dtype: reported already
  const auto bytes = files.bytes(t.name);
  int64_t bad = 0, first = -1;
  auto note = [&](int64_t i) {
    if (bad++ == 0) first = i;
  };
  switch (t.dtype) {
    case DType::kF8E4M3:
      for (size_t i = 0; i < bytes.size(); ++i)
        if ((static_cast<uint8_t>(bytes[i]) & 0x7F) == 0x7F) note(static_cast<int64_t>(i));
      break;
    case DType::kF32:
      for (size_t i = 0; i + 4 <= bytes.size(); i += 4) {
        uint32_t u;
        std::memcpy(&u, bytes.data() + i, 4);
        if ((u & 0x7F800000u) == 0x7F800000u) note(static_cast<int64_t>(i / 4));
      }
      break;
    case DType::kBF16:
      for (size_t i = 0; i + 2 <= bytes.size(); i += 2) {
        uint16_t u;
        std::memcpy(&u, bytes.data() + i, 2);
        if ((u & 0x7F80u) == 0x7F80u) note(static_cast<int64_t>(i / 2));
      }
      break;
    default:
      return;
  }
  if (bad > 0) {
    problems.push_back(fmt::format("non-finite scale: {} has {} NaN/Inf value{} (first at element {}); every "
                                   "value it scales would decode to NaN",
                                   t.name, bad, bad == 1 ? "" : "s", first));
  }
}

void touch_pages(const ShardedCheckpoint& files, const TensorPlan& plan, bool show_progress) {
  uint64_t total = 0;
  for (const auto* t : plan.all_tensors())
    if (auto e = files.find(t->name); e.info) total += e.info->byte_size;
  // A bar for a checkpoint that loads in a blink is noise; show it from 256 MB up.
  ByteProgress progress("loading weights", total, show_progress && total >= (uint64_t{256} << 20));
  volatile unsigned char sink = 0;
  for (const auto* t : plan.all_tensors()) {
    auto e = files.find(t->name);
    if (!e.info) continue;
    auto bytes = files.bytes(t->name);
    // Ask the kernel to read ahead, then fault each page in.
    const auto page = static_cast<uintptr_t>(4096);
    const auto begin = reinterpret_cast<uintptr_t>(bytes.data()) & ~(page - 1);
    madvise(reinterpret_cast<void*>(begin), bytes.size() + (reinterpret_cast<uintptr_t>(bytes.data()) - begin),
            MADV_WILLNEED);
    constexpr size_t kChunk = 64 << 20;
    for (size_t off = 0; off < bytes.size(); off += kChunk) {
      const size_t end = std::min(bytes.size(), off + kChunk);
      for (size_t i = off; i < end; i += page) sink = sink + static_cast<unsigned char>(bytes[i]);
      progress.add(end - off);
    }
  }
  progress.finish();
}

}  // namespace

ExpertStorage detect_expert_storage(const ShardedCheckpoint& files, const ModelConfig& c) {
  // Layer 0 decides; the plan check then holds every layer to the same layout.
  const std::string p = c.layer_prefix(0) + "mlp.experts.";
  return files.contains(p + "gate_up_proj") ? ExpertStorage::kFused : ExpertStorage::kPerExpert;
}

namespace {

// Missing, wrongly typed or shaped planned tensors and bad scale values; `planned` collects the names.
void check_planned(const ShardedCheckpoint& files, const TensorPlan& plan, std::vector<std::string>& problems,
                   std::unordered_set<std::string_view>& planned) {
  for (const auto& m : plan.modules) {
    for (const auto& t : m.tensors) {
      planned.insert(t.name);
      auto e = files.find(t.name);
      if (!e.info) {
        if (!t.optional) problems.push_back(fmt::format("missing: {} (expected {})", t.name, expected_str(t)));
        continue;
      }
      const bool dtype_ok = e.info->dtype == t.dtype ||
                            std::find(t.also_accepted.begin(), t.also_accepted.end(), e.info->dtype) !=
                                t.also_accepted.end();
      if (!dtype_ok) {
        problems.push_back(fmt::format("wrong dtype: {} is {}, expected {} (module {} as {})", t.name,
                                       dtype_name(e.info->dtype), dtype_name(t.dtype), m.path, m.format.name()));
      }
      if (!same_shape(e.info->shape, t.shape)) {
        problems.push_back(fmt::format("wrong shape: {} is {}, expected {}", t.name, shape_str(e.info->shape),
                                       shape_str(t.shape)));
      } else {
        check_scale_values(files, t, problems);
      }
    }
    check_nvfp4_expert_scales(files, m, problems);
  }
}

std::string unexpected_str(const ShardedCheckpoint& files, const std::string& name) {
  return fmt::format("unexpected: {} ({} {})", name, dtype_name(files.at(name).info->dtype),
                     shape_str(files.at(name).info->shape));
}

bool is_float_dtype(DType d) { return d == DType::kBF16 || d == DType::kF16 || d == DType::kF32; }

}  // namespace

std::vector<std::string> check_against_plan(const ShardedCheckpoint& files, const TensorPlan& plan,
                                            size_t* known_unused) {
  std::vector<std::string> problems;
  std::unordered_set<std::string_view> planned;
  check_planned(files, plan, problems, planned);
  size_t unused = 0;
  for (const auto& name : files.tensor_names()) {
    if (planned.count(name)) continue;
    if (is_known_unused_tensor(name)) {
      ++unused;
      continue;
    }
    problems.push_back(unexpected_str(files, name));
  }
  if (known_unused) *known_unused = unused;
  return problems;
}

std::vector<std::string> check_mtp_against_plan(const ShardedCheckpoint& files, const TensorPlan& mtp_plan) {
  std::vector<std::string> problems;
  std::unordered_set<std::string_view> planned;
  check_planned(files, mtp_plan, problems, planned);
  for (const auto& name : files.tensor_names()) {
    if (name.starts_with(kMtpPrefix) && !planned.count(name)) problems.push_back(unexpected_str(files, name));
  }
  return problems;
}

std::string LoadedCheckpoint::mtp_unavailable_reason() const {
  if (has_mtp_) return {};
  if (config_.mtp_num_hidden_layers == 0 && mtp_tensors_ == 0)
    return "the checkpoint has no MTP layer (config.json mtp_num_hidden_layers is 0 and there are no mtp.* tensors)";
  if (mtp_tensors_ == 0)
    return fmt::format("the checkpoint has no mtp.* tensors (config.json says mtp_num_hidden_layers {}; some "
                       "conversions drop them)",
                       config_.mtp_num_hidden_layers);
  std::string msg = fmt::format("the checkpoint's MTP layer ({} mtp.* tensors) is not usable: {} problem{}",
                                mtp_tensors_, mtp_problems_.size(), mtp_problems_.size() == 1 ? "" : "s");
  constexpr size_t kShown = 10;
  for (size_t i = 0; i < mtp_problems_.size() && i < kShown; ++i) msg += "\n  " + mtp_problems_[i];
  if (mtp_problems_.size() > kShown) msg += fmt::format("\n  ... and {} more", mtp_problems_.size() - kShown);
  return msg;
}

LoadedCheckpoint LoadedCheckpoint::open(std::string_view model, const LoadOptions& options) {
  LoadedCheckpoint ck;
  ck.dir_ = locate_model(model, options.revision);
  ck.config_ = ModelConfig::load(ck.dir_);
  ck.generation_ = GenerationConfig::load(ck.dir_);
  ck.quant_ = QuantConfig::load(ck.dir_);
  ck.files_ = std::make_shared<ShardedCheckpoint>(ShardedCheckpoint::open(ck.dir_));
  ck.experts_ = detect_expert_storage(*ck.files_, ck.config_);
  const bool kv_scales = ck.quant_.kv_cache() == KvCacheQuant::kFP8;
  ck.plan_ = make_tensor_plan(
      ck.config_, [&](std::string_view path) { return ck.quant_.format_for(path); }, ck.experts_, kv_scales);
  const auto problems = check_against_plan(*ck.files_, ck.plan_, &ck.known_unused_);
  if (!problems.empty()) {
    constexpr size_t kShown = 25;
    std::string msg = fmt::format("checkpoint does not match its config ({}, {} quantization): {} problem{}",
                                  ck.config_.architecture, ck.quant_.is_quantized() ? ck.quant_.algo() : "no",
                                  problems.size(), problems.size() == 1 ? "" : "s");
    for (size_t i = 0; i < problems.size() && i < kShown; ++i) msg += "\n  " + problems[i];
    if (problems.size() > kShown) msg += fmt::format("\n  ... and {} more", problems.size() - kShown);
    throw CheckpointError(ck.dir_.string(), msg);
  }
  ck.open_mtp(kv_scales);
  // The MTP block's pages are not touched: only speculative decoding reads them (bind_mtp), and the
  // real one is 1.7 GB of BF16.
  if (options.touch_pages) touch_pages(*ck.files_, ck.plan_, options.show_progress);
  return ck;
}

void LoadedCheckpoint::open_mtp(bool kv_scales) {
  for (const auto& name : files_->tensor_names())
    if (name.starts_with(kMtpPrefix)) ++mtp_tensors_;
  if (mtp_tensors_ == 0) return;
  if (config_.mtp_num_hidden_layers != 1) {
    mtp_problems_.push_back(fmt::format("config.json mtp_num_hidden_layers is {}; only 1 (every Qwen3.5/3.6 "
                                        "release) is supported",
                                        config_.mtp_num_hidden_layers));
    return;
  }
  mtp_experts_ = files_->contains("mtp.layers.0.mlp.experts.gate_up_proj") ? ExpertStorage::kFused
                                                                            : ExpertStorage::kPerExpert;
  const ShardedCheckpoint& files = *files_;
  const QuantConfig& quant = quant_;
  const ExpertStorage experts = mtp_experts_;
  const FormatResolver format_of = [&files, &quant, experts](std::string_view path) {
    // Fused experts are only known unquantized; elsewhere a float ".weight" on disk means BF16.
    if (experts == ExpertStorage::kFused && path.find(".mlp.experts.") != std::string_view::npos)
      return WeightFormat::bf16();
    auto w = files.find(std::string(path) + ".weight");
    if (w.info && is_float_dtype(w.info->dtype)) return WeightFormat::bf16();
    return quant.format_for(path);
  };
  try {
    mtp_plan_ = make_mtp_plan(config_, format_of, mtp_experts_, kv_scales);
    mtp_problems_ = check_mtp_against_plan(files, mtp_plan_);
  } catch (const CheckpointError& e) {
    mtp_problems_.push_back(e.what());
  }
  has_mtp_ = mtp_problems_.empty();
  if (!has_mtp_) mtp_plan_ = {};
}

WeightView LoadedCheckpoint::tensor(std::string_view name) const {
  auto e = files_->at(name);
  return {e.info, files_->bytes(name)};
}

void LoadedCheckpoint::touch_weight_pages(bool show_progress) const { touch_pages(*files_, plan_, show_progress); }

uint64_t LoadedCheckpoint::file_bytes() const {
  uint64_t n = 0;
  for (const auto& f : files_->files()) n += f->file_size();
  return n;
}

}  // namespace fp4serve
