#include "tools/synth_writer.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>

#include <spdlog/spdlog.h>

#include "checkpoint/checkpoint_error.h"
#include "checkpoint/model_config.h"
#include "checkpoint/quant_config.h"
#include "tensor/float_formats.h"
#include "tools/synth_quantize.h"
#include "tools/synth_random.h"
#include "tools/synth_values.h"
#include "tools/synth_vision.h"

namespace fp4serve::synth {
namespace {

constexpr int64_t kFp8Band = 128;
constexpr float kWeightStd = 0.02f;
// Modules up to this many values are generated whole when that saves a pass (64 MB of floats).
constexpr int64_t kHeldElements = int64_t{16} << 20;

std::string_view leaf(std::string_view path) {
  const size_t dot = path.rfind('.');
  return dot == std::string_view::npos ? path : path.substr(dot + 1);
}

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Fills chunk [offset, offset + size) of a tensor made of `units` (rows, or 128-row bands of block
// FP8) of unit_bytes each (the last one may be shorter), encoding the units it touches in
// parallel. Each unit is computed on its own, so the bytes do not depend on chunking or threads.
using EncodeUnit = std::function<void(int64_t unit, std::byte* dst)>;

void fill_units(uint64_t offset, std::span<std::byte> chunk, uint64_t unit_bytes, uint64_t total_bytes,
                const EncodeUnit& encode) {
  const auto u0 = static_cast<int64_t>(offset / unit_bytes);
  const auto u1 = static_cast<int64_t>((offset + chunk.size() + unit_bytes - 1) / unit_bytes);
  const uint64_t base = static_cast<uint64_t>(u0) * unit_bytes;
  const uint64_t end = std::min<uint64_t>(total_bytes, static_cast<uint64_t>(u1) * unit_bytes);
  const bool aligned = base == offset && end == offset + chunk.size();
  std::unique_ptr<std::byte[]> scratch;
  std::byte* dst = chunk.data();
  if (!aligned) {
    scratch.reset(new std::byte[end - base]);
    dst = scratch.get();
  }
#pragma omp parallel for schedule(dynamic, 4)
  for (int64_t u = u0; u < u1; ++u) encode(u, dst + static_cast<uint64_t>(u - u0) * unit_bytes);
  if (!aligned) std::memcpy(chunk.data(), dst + (offset - base), chunk.size());
}

void store_f32(std::span<std::byte> chunk, uint64_t offset, float value) {
  std::byte bytes[4];
  std::memcpy(bytes, &value, 4);
  std::memcpy(chunk.data(), bytes + offset, chunk.size());
}

float* thread_buffer(size_t n) {
  thread_local std::vector<float> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

float round_to_bf16(float x) { return bf16_to_f32(f32_to_bf16(x)); }

// "...experts.17.down_proj" -> "...experts.*.down_proj": ModelOpt calibrates one input quantizer per
// projection type for all experts, so every expert carries the same input_scale.
std::string input_quantizer_key(const std::string& path) {
  const size_t at = path.find(".experts.");
  if (at == std::string::npos) return path;
  const size_t begin = at + 9;
  const size_t end = path.find('.', begin);
  if (end == std::string::npos) return path;
  return path.substr(0, begin) + "*" + path.substr(end);
}

class Synthesizer {
 public:
  Synthesizer(uint64_t seed, SafetensorsWriter& writer) : seed_(seed), writer_(writer) {}

  void set_progress(ByteProgress* progress) { progress_ = progress; }

  void add_plan(const TensorPlan& plan) {
    for (const auto& m : plan.modules) {
      switch (m.kind) {
        case ModuleKind::kEmbedding:
        case ModuleKind::kDense:
          for (const auto& t : m.tensors) {
            if (t.optional) continue;
            const int64_t cols = t.shape.size() <= 1 ? numel(t.shape) : numel(t.shape) / t.shape[0];
            add_dense(t, t.dtype, {make_source(seed_, t.name, numel(t.shape) / cols, cols, distribution_for_tensor(t.name))});
          }
          break;
        case ModuleKind::kLinear:
          add_linear(m.path, m.format, m.out_features, m.in_features, m.tensors);
          break;
        case ModuleKind::kRoutedExperts:
          add_experts(m);
          break;
      }
    }
  }

 private:
  Source weight_source(const std::string& path, int64_t rows, int64_t cols) const {
    return make_source(seed_, path, rows, cols, Distribution::normal(0.0f, kWeightStd));
  }

  void add(const PlannedTensor& t, DType dtype, SafetensorsWriter::FillFn fill) {
    writer_.add(t.name, dtype, t.shape, [this, fill = std::move(fill)](uint64_t offset, std::span<std::byte> chunk) {
      fill(offset, chunk);
      if (progress_) progress_->add(chunk.size());
    });
  }

  void add_scalar(const PlannedTensor& t, std::function<float()> value) {
    add(t, DType::kF32, [value = std::move(value)](uint64_t offset, std::span<std::byte> chunk) {
      store_f32(chunk, offset, value());
    });
  }

  // An unquantized tensor whose rows are the rows of `segments` one after another (one segment for
  // most; the 2E experts of a fused gate_up_proj).
  void add_dense(const PlannedTensor& t, DType dtype, std::vector<Source> segments) {
    const int64_t seg_rows = segments.front().rows, cols = segments.front().cols;
    const uint64_t row_bytes = static_cast<uint64_t>(cols) * dtype_size(dtype);
    const uint64_t total = row_bytes * static_cast<uint64_t>(seg_rows) * segments.size();
    auto segs = std::make_shared<std::vector<Source>>(std::move(segments));
    add(t, dtype, [segs, seg_rows, cols, row_bytes, total, dtype](uint64_t offset, std::span<std::byte> chunk) {
      fill_units(offset, chunk, row_bytes, total, [&](int64_t u, std::byte* dst) {
        float* row = thread_buffer(static_cast<size_t>(cols));
        generate_row((*segs)[static_cast<size_t>(u / seg_rows)], u % seg_rows, row);
        if (dtype == DType::kF32) {
          std::memcpy(dst, row, static_cast<size_t>(cols) * 4);
        } else {
          auto* out = reinterpret_cast<uint16_t*>(dst);
          const bool half = dtype == DType::kF16;
          for (int64_t c = 0; c < cols; ++c) out[c] = half ? f32_to_f16(row[c]) : f32_to_bf16(row[c]);
        }
      });
    });
  }

  // The global amax of a group of sources, computed once (a full pass over the values) and kept.
  float group_amax(const std::string& key, const std::vector<Source>& group) {
    auto it = amax_.find(key);
    if (it != amax_.end()) return it->second;
    float amax = 0.0f;
    for (const auto& s : group) amax = std::max(amax, source_abs_max(s));
    amax_[key] = amax;
    return amax;
  }

  // NVFP4 modules small enough to hold in memory (experts, shared experts): one pass over the
  // group's values gives its amax and every member's block scales. The scales wait until their
  // tensor is written (the file order is F32, ..., F8 scales, U8 values), so each module's values
  // are drawn twice in all instead of three times; what waits is 1/8 of the packed bytes.
  float nvfp4_prepare(const std::string& key, const std::vector<Source>& group) {
    auto it = amax_.find(key);
    if (it != amax_.end()) return it->second;
    std::vector<std::vector<float>> values;
    float amax = 0.0f;
    for (const auto& s : group) {
      values.emplace_back(static_cast<size_t>(s.rows * s.cols));
      generate_rows(s, 0, s.rows, values.back().data());
      amax = std::max(amax, abs_max(values.back().data(), s.rows * s.cols));
    }
    const float s2 = nvfp4_global_scale(amax);
    for (size_t i = 0; i < group.size(); ++i) {
      const Source& s = group[i];
      std::vector<uint8_t> scales(static_cast<size_t>(s.rows * s.cols / 16));
      const float* w = values[i].data();
#pragma omp parallel for schedule(static)
      for (int64_t r = 0; r < s.rows; ++r) {
        nvfp4_encode_row(w + r * s.cols, s.cols, s2, nullptr, scales.data() + r * s.cols / 16);
      }
      nvfp4_scales_[s.name] = std::move(scales);
    }
    amax_[key] = amax;
    return amax;
  }

  float input_scale(const std::string& path, float divisor) const {
    // A plausible static activation scale: activation amax 4.5..45 over 448 (0.01..0.1), /6 more
    // for NVFP4's two-level scale; the same for every expert of a projection type.
    Xoshiro256Plus rng(name_seed(seed_, input_quantizer_key(path) + ":input_scale"));
    return static_cast<float>((0.01 + 0.09 * rng.uniform()) / divisor);
  }

  void add_linear(const std::string& path, const WeightFormat& f, int64_t rows, int64_t cols,
                  const std::vector<PlannedTensor>& tensors) {
    const Source src = weight_source(path, rows, cols);
    // NVFP4: gate and up of one expert (and of the shared expert) share one weight_scale_2,
    // ModelOpt's guarantee for the fused w13 that vLLM builds (docs/quant-formats.md §3.4).
    std::string amax_key = path;
    std::vector<Source> group = {src};
    const std::string_view l = leaf(path);
    if (f.kind == WeightFormatKind::kNVFP4 && (l == "gate_proj" || l == "up_proj")) {
      const std::string prefix = path.substr(0, path.size() - l.size());
      amax_key = prefix + "gate_up_proj";
      group = {weight_source(prefix + "gate_proj", rows, cols), weight_source(prefix + "up_proj", rows, cols)};
    }
    for (const auto& t : tensors) {
      const std::string suffix = t.name.substr(path.size() + 1);
      if (t.optional && suffix != "input_scale") continue;
      add_linear_tensor(t, suffix, f, src, amax_key, group);
    }
  }

  void add_linear_tensor(const PlannedTensor& t, const std::string& suffix, const WeightFormat& f, const Source& src,
                         const std::string& amax_key, const std::vector<Source>& group) {
    const int64_t cols = src.cols;
    const uint64_t total = t.byte_size();
    const bool held = f.kind == WeightFormatKind::kNVFP4 && src.rows * src.cols <= kHeldElements;
    auto amax = [this, amax_key, group, held] {
      return held ? nvfp4_prepare(amax_key, group) : group_amax(amax_key, group);
    };
    switch (f.kind) {
      case WeightFormatKind::kBF16:
        add_dense(t, t.dtype, {src});
        return;
      case WeightFormatKind::kNVFP4:
        if (suffix == "weight_scale" && src.rows * src.cols <= kHeldElements) {
          // Computed with the group's amax and kept since then (nvfp4_prepare).
          add(t, t.dtype, [=, this](uint64_t offset, std::span<std::byte> chunk) {
            amax();
            auto it = nvfp4_scales_.find(src.name);
            if (it == nvfp4_scales_.end()) throw std::logic_error("synth: block scales of " + src.name + " not ready");
            std::memcpy(chunk.data(), it->second.data() + offset, chunk.size());
            if (offset + chunk.size() == total) nvfp4_scales_.erase(it);
          });
        } else if (suffix == "weight" || suffix == "weight_scale") {
          const bool packed = suffix == "weight";
          const uint64_t row_bytes = static_cast<uint64_t>(cols) / (packed ? 2 : 16);
          add(t, t.dtype, [=](uint64_t offset, std::span<std::byte> chunk) {
            const float s2 = nvfp4_global_scale(amax());
            fill_units(offset, chunk, row_bytes, total, [&](int64_t r, std::byte* dst) {
              float* row = thread_buffer(static_cast<size_t>(cols));
              generate_row(src, r, row);
              auto* out = reinterpret_cast<uint8_t*>(dst);
              nvfp4_encode_row(row, cols, s2, packed ? out : nullptr, packed ? nullptr : out);
            });
          });
        } else if (suffix == "weight_scale_2") {
          add_scalar(t, [=] { return nvfp4_global_scale(amax()); });
        } else if (suffix == "input_scale") {
          const float v = input_scale(src.name, 6.0f);
          add_scalar(t, [v] { return v; });
        }
        return;
      case WeightFormatKind::kFP8PerTensor:
        if (suffix == "weight") {
          add(t, t.dtype, [=](uint64_t offset, std::span<std::byte> chunk) {
            const float scale = fp8_tensor_scale(amax());
            fill_units(offset, chunk, static_cast<uint64_t>(cols), total, [&](int64_t r, std::byte* dst) {
              float* row = thread_buffer(static_cast<size_t>(cols));
              generate_row(src, r, row);
              fp8_encode_row(row, cols, scale, reinterpret_cast<uint8_t*>(dst));
            });
          });
        } else if (suffix == "weight_scale") {
          add_scalar(t, [=] { return fp8_tensor_scale(amax()); });
        } else if (suffix == "input_scale") {
          const float v = input_scale(src.name, 1.0f);
          add_scalar(t, [v] { return v; });
        }
        return;
      case WeightFormatKind::kFP8Block:
        add_fp8_block_tensor(t, suffix, src);
        return;
      case WeightFormatKind::kInt4Gptq:
        add_int4_tensor(t, suffix, f, src);
        return;
    }
  }

  // Qwen's block FP8: bands of 128 rows; weight_scale_inv stored as bf16 as in the release, and the
  // values divided by that rounded factor so that weight * weight_scale_inv is the quantized value.
  void add_fp8_block_tensor(const PlannedTensor& t, const std::string& suffix, const Source& src) {
    const int64_t rows = src.rows, cols = src.cols;
    const int64_t col_blocks = (cols + kFp8Band - 1) / kFp8Band;
    const bool data = suffix == "weight";
    if (!data && suffix != "weight_scale_inv") return;
    const DType dtype = data ? DType::kF8E4M3 : DType::kBF16;
    const uint64_t unit_bytes = data ? static_cast<uint64_t>(kFp8Band * cols) : static_cast<uint64_t>(col_blocks) * 2;
    const uint64_t total = data ? static_cast<uint64_t>(rows * cols)
                                : static_cast<uint64_t>((rows + kFp8Band - 1) / kFp8Band * col_blocks) * 2;
    add(t, dtype, [=](uint64_t offset, std::span<std::byte> chunk) {
      fill_units(offset, chunk, unit_bytes, total, [&](int64_t band, std::byte* dst) {
        const int64_t r0 = band * kFp8Band, n = std::min(kFp8Band, rows - r0);
        float* w = thread_buffer(static_cast<size_t>(n * cols + col_blocks));
        float* scales = w + n * cols;
        for (int64_t r = 0; r < n; ++r) generate_row(src, r0 + r, w + r * cols);
        fp8_block_encode_band(w, n, cols, round_to_bf16, data ? reinterpret_cast<uint8_t*>(dst) : nullptr, scales);
        if (!data) {
          auto* out = reinterpret_cast<uint16_t*>(dst);
          for (int64_t j = 0; j < col_blocks; ++j) out[j] = f32_to_bf16(scales[j]);
        }
      });
    });
  }

  // INT4 GPTQ tensors are K-major ([K/8, N], [K/g, N]), so a module is quantized whole (the largest,
  // 8192 x 2048, is 64 MB of floats) and kept until its next tensor asks for something else.
  struct Int4Module {
    std::string path;
    std::vector<int32_t> qweight;
    std::vector<uint16_t> scales;
  };

  const Int4Module& int4_module(const Source& src, int64_t group) {
    if (!int4_ || int4_->path != src.name) {
      auto m = std::make_unique<Int4Module>();
      m->path = src.name;
      std::vector<float> w(static_cast<size_t>(src.rows * src.cols));
      generate_rows(src, 0, src.rows, w.data());
      m->qweight.resize(static_cast<size_t>(src.cols / 8 * src.rows));
      m->scales.resize(static_cast<size_t>(src.cols / group * src.rows));
      int4_gptq_encode(w.data(), src.rows, src.cols, group, m->qweight.data(), m->scales.data());
      int4_ = std::move(m);
    }
    return *int4_;
  }

  void add_int4_tensor(const PlannedTensor& t, const std::string& suffix, const WeightFormat& f, const Source& src) {
    const int64_t group = f.group_size > 0 ? f.group_size : src.cols;
    if (suffix == "qzeros") {
      // Symmetric: every zero point is 8, stored as 7 by auto_gptq's v1 convention.
      add(t, t.dtype, [](uint64_t, std::span<std::byte> chunk) {
        std::memset(chunk.data(), 0x77, chunk.size());
      });
      return;
    }
    if (suffix != "qweight" && suffix != "scales") return;
    const bool qweight = suffix == "qweight";
    add(t, t.dtype, [=, this](uint64_t offset, std::span<std::byte> chunk) {
      const Int4Module& m = int4_module(src, group);
      const auto* bytes = qweight ? reinterpret_cast<const std::byte*>(m.qweight.data())
                                  : reinterpret_cast<const std::byte*>(m.scales.data());
      std::memcpy(chunk.data(), bytes + offset, chunk.size());
    });
  }

  void add_experts(const PlannedModule& m) {
    const int64_t E = m.num_experts, I = m.out_features, H = m.in_features;
    const std::string& p = m.path;  // "...mlp.experts"
    auto expert = [&](int64_t e, const char* proj) { return p + "." + std::to_string(e) + "." + proj; };
    if (!m.format.is_quantized() && m.tensors.size() == 2 && m.tensors[0].name == p + ".gate_up_proj") {
      // Fused BF16 release: gate_up_proj[e] = [gate rows ; up rows], down_proj[e] = down.
      std::vector<Source> gate_up, down;
      for (int64_t e = 0; e < E; ++e) {
        gate_up.push_back(weight_source(expert(e, "gate_proj"), I, H));
        gate_up.push_back(weight_source(expert(e, "up_proj"), I, H));
        down.push_back(weight_source(expert(e, "down_proj"), H, I));
      }
      add_dense(m.tensors[0], m.tensors[0].dtype, std::move(gate_up));
      add_dense(m.tensors[1], m.tensors[1].dtype, std::move(down));
      return;
    }
    // Per expert: the plan lists each expert projection's tensors together, in order.
    for (size_t i = 0; i < m.tensors.size();) {
      const std::string& name = m.tensors[i].name;
      const size_t proj_end = name.find("_proj.", p.size()) + 5;
      const std::string path = name.substr(0, proj_end);
      std::vector<PlannedTensor> mine;
      while (i < m.tensors.size() && m.tensors[i].name.compare(0, path.size() + 1, path + ".") == 0) {
        mine.push_back(m.tensors[i++]);
      }
      const bool down_proj = leaf(path) == "down_proj";
      add_linear(path, m.format, down_proj ? H : I, down_proj ? I : H, mine);
    }
  }

  uint64_t seed_;
  SafetensorsWriter& writer_;
  ByteProgress* progress_ = nullptr;
  std::map<std::string, float> amax_;
  std::map<std::string, std::vector<uint8_t>> nvfp4_scales_;
  std::unique_ptr<Int4Module> int4_;
};

void write_text_file(const std::filesystem::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw CheckpointError(file.string(), "cannot write");
}

std::vector<std::string> check_quant_config(const SynthPlan& sp, SynthFormat format) {
  std::optional<std::string_view> hf_quant;
  for (const auto& [name, text] : sp.extra_files) {
    if (name == "hf_quant_config.json") hf_quant = text;
  }
  const QuantConfig qc = QuantConfig::parse(sp.config_text, hf_quant);
  std::vector<std::string> out;
  auto check = [&](const std::string& path) {
    const WeightFormat wrote = release_format(format, path), says = qc.format_for(path);
    if (!(wrote == says)) out.push_back(path + ": wrote " + wrote.name() + ", config says " + says.name());
  };
  for (const auto& m : sp.plan.modules) {
    if (m.kind == ModuleKind::kLinear) check(m.path);
    if (m.kind == ModuleKind::kRoutedExperts) {
      for (int64_t e : {int64_t{0}, m.num_experts - 1}) {
        for (const char* proj : {"gate_proj", "up_proj", "down_proj"}) {
          check(m.path + "." + std::to_string(e) + "." + proj);
        }
      }
    }
  }
  return out;
}

}  // namespace

SynthPlan plan_synth(const SynthOptions& options) {
  if (options.dims.num_hidden_layers < 1) throw std::invalid_argument("synth: --layers must be at least 1");
  const FormatResolver resolver = release_resolver(options.format);
  const ExpertStorage storage = expert_storage_for(options.format);
  // The quantization files list modules, so they come from a plan of the config without them.
  const ModelConfig bare = ModelConfig::parse(hf_json_text(config_json(options.dims)));
  const QuantFiles quant = quant_files_for(options.format, make_tensor_plan(bare, resolver, storage));
  SynthPlan sp;
  sp.config_text = hf_json_text(config_json(options.dims, quant.config_section));
  sp.extra_files.push_back({"generation_config.json", hf_json_text(generation_config_json(options.dims))});
  for (const auto& f : quant.extra_files) sp.extra_files.push_back(f);
  // What we plan from is the config we wrote, parsed back the way the loader will parse it.
  const ModelConfig written = ModelConfig::parse(sp.config_text);
  sp.plan = make_tensor_plan(written, resolver, storage);
  if (options.mtp && written.mtp_num_hidden_layers > 0) {
    sp.mtp_plan = make_mtp_plan(written, [](std::string_view) { return WeightFormat::bf16(); }, ExpertStorage::kFused);
  }
  if (options.vision) sp.vision_plan = make_vision_plan(sp.config_text);
  return sp;
}

SynthResult synthesize(const SynthOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  SynthResult result;
  const SynthPlan sp = plan_synth(options);
  result.config_disagreements = check_quant_config(sp, options.format);

  std::filesystem::create_directories(options.out_dir);
  write_text_file(options.out_dir / "config.json", sp.config_text);
  result.files.push_back(options.out_dir / "config.json");
  for (const auto& [name, text] : sp.extra_files) {
    write_text_file(options.out_dir / name, text);
    result.files.push_back(options.out_dir / name);
  }

  SafetensorsWriter writer;
  writer.set_metadata({{"format", "pt"}});
  Synthesizer synth(options.seed, writer);
  synth.add_plan(sp.plan);
  synth.add_plan(sp.mtp_plan);
  synth.add_plan(sp.vision_plan);
  result.tensor_count = writer.tensor_count();
  result.tensor_bytes = writer.total_bytes();
  {
    ByteProgress progress("synth " + std::string(synth_format_name(options.format)), result.tensor_bytes,
                          options.progress);
    synth.set_progress(&progress);
    for (auto& f : writer.write_sharded(options.out_dir, options.max_shard_bytes)) result.files.push_back(f);
    progress.finish();
    synth.set_progress(nullptr);
  }
  for (const auto& f : result.files) result.file_bytes += std::filesystem::file_size(f);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

std::vector<float> synth_weight_rows(uint64_t seed, const std::string& module_path, int64_t cols, int64_t r0,
                                     int64_t r1) {
  const Source s = make_source(seed, module_path, r1, cols, Distribution::normal(0.0f, kWeightStd));
  std::vector<float> out(static_cast<size_t>((r1 - r0) * cols));
  generate_rows(s, r0, r1, out.data());
  return out;
}

}  // namespace fp4serve::synth
