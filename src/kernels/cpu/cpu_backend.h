// The CPU backend: the op table of backend.h on the CPU kernels (kernels/cpu), for one instruction-set
// tier chosen at construction (cpu_features.h: the best the machine and OS allow, capped by
// FP4SERVE_CPU_ISA).
//
// Numerics contract: every op is bit-exact to itself whatever the batch composition, the split of a
// prefill into chunks, prefix-cache hits or the thread count (work is split over output elements and
// each reduction has a fixed order, thread_pool.h); the scalar, avx2 and avx512 tiers are bit-identical
// to each other, and avx512_bf16 / amx are within the tolerance kernel_table.h states of scalar (and
// bit-identical to themselves whatever M, tiles or threads).
//
// Memory: device memory is host memory. Buffers of 64 KiB and more are fresh anonymous mappings (zero
// pages committed on first write), smaller ones aligned heap blocks. Weights: on the tiers with panel
// kernels (avx512_bf16 with VBMI, amx) every BF16, FP8 and NVFP4 linear is repacked into 16-row panels
// in one huge-page arena (packed_weight.h) and the checkpoint's pages of it are released; INT4 GPTQ is
// repacked to nibble rows on every tier. Kernel scratch is per thread, grown once by reserve().
#pragma once

#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/packed_weight.h"

namespace fp4serve::kernels::cpu {

class PackedWeightCacheReader;  // packed_weight_cache.h
class PackedWeightCacheWriter;

class CpuBackend final : public Backend {
 public:
  // `isa`: the tier every op runs on (must be supported by this CPU).
  explicit CpuBackend(Isa isa = active_isa());
  ~CpuBackend() override;

  Isa isa() const { return isa_; }
  // Weight bookkeeping for logs and doctor.
  int64_t packed_linears() const { return packed_linears_; }
  int64_t packed_bytes() const { return packed_bytes_; }
  double pack_seconds() const { return pack_seconds_; }
  bool packs_weights() const { return pack_; }

  // Packed-weight cache (packed_weight_cache.h), set before the first prepare_*: when `file` holds
  // panels for `identity` (the checkpoint's identity; the tier and the format version are added
  // here) they are mapped from it instead of packed, else the panels packed at load are written to
  // it. Returns true on a hit. Tiers without panel kernels ignore it (false).
  bool use_weight_cache(const std::filesystem::path& file, const std::string& identity);
  // After the last prepare_*: commits a written cache (temp file + rename), or removes a file whose
  // entries did not match. Returns a line for the start-up log ("" when no cache was set).
  std::string finish_weight_cache();

  Device device() const override { return Device::kCpu; }
  std::string describe() const override;
  void reserve(const StepLimits& limits, const ModelShape& shape) override;

  DeviceBuffer allocate(std::size_t bytes, std::string_view what) override;
  void upload(const TensorView& dst, const void* host) override;
  void download(void* host, const TensorView& src) override;
  void copy(const TensorView& dst, const TensorView& src) override;
  void zero(const TensorView& dst) override;
  void synchronize() override {}

  LinearHandle prepare_linear(const WeightView& w, const ReleaseSource& release = {}) override;
  MoeHandle prepare_moe(const MoeWeights& moe, const ReleaseSource& release = {}) override;
  TensorView prepare_tensor(const TensorView& host) override;
  std::string weights_summary() const override;

  void embedding(const TensorView& table, const TensorView& ids, const TensorView& out) override;
  void rmsnorm(const TensorView& x, const TensorView& w, float eps, NormKind kind, const TensorView& out) override;
  void rmsnorm_gated(const TensorView& x, const TensorView& z, const TensorView& w, float eps,
                     const TensorView& out) override;
  void linears(const TensorView& x, std::span<const LinearOut> outs) override;
  void to_bf16(const TensorView& x, const TensorView& out) override;
  void round_bf16(const TensorView& x) override;
  void residual_add(const TensorView& x, const TensorView& y) override;
  void rope(const TensorView& x, const TensorView& positions, const RopeConfig& cfg) override;
  void kv_write(std::span<const AttentionSeqDesc> seqs, const TensorView& k, const TensorView& v) override;
  void attention(std::span<const AttentionSeqDesc> seqs, const TensorView& q, const TensorView& gate,
                 const TensorView& out, AttentionMath math) override;
  void gdn_gating(const TensorView& a, const TensorView& b, const TensorView& A_log, const TensorView& dt_bias,
                  const TensorView& g, const TensorView& beta) override;
  void gdn_sequences(const GdnDims& dims, const TensorView& conv_weight, std::span<const GdnSeqDesc> seqs,
                     const TensorView& x, const TensorView& g, const TensorView& beta, const TensorView& qkv_out,
                     const TensorView& core_out) override;
  void moe(const TensorView& x, const MoeHandle& moe, const TensorView& out) override;
  void state_copy(std::span<const GdnStateRef> dst, std::span<const GdnStateRef> src, const GdnDims& dims) override;
  void state_zero(std::span<const GdnStateRef> dst, const GdnDims& dims) override;
  void gather_rows(const TensorView& x, std::span<const int64_t> rows, const TensorView& out) override;
  void layernorm(const TensorView& x, const TensorView& w, const TensorView& b, float eps,
                 const TensorView& out) override;
  void bias_activation(const TensorView& x, const TensorView& bias, Activation act, const TensorView& out) override;
  void rope_table(const TensorView& x, const TensorView& cos, const TensorView& sin) override;
  void dense_attention(std::span<const DenseSegment> segments, const TensorView& q, const TensorView& k,
                       const TensorView& v, const TensorView& out, AttentionMath math) override;
  void sample(const TensorView& logits, std::span<const SampleRow> rows, const SamplingConfig& config,
              std::span<SampleResult> out) override;

 private:
  // The view the kernels run: panels attached where the tier has panel kernels.
  WeightView prepared_view(const WeightView& w, const ReleaseSource& release);

  const Isa isa_;
  const bool pack_;  // the tier runs panel kernels
  std::mutex mu_;    // prepare_* may run from several loader threads
  std::unique_ptr<PanelArena> arena_;
  std::deque<WeightView> linears_;          // what LinearHandle::impl points to
  std::deque<MoeWeights> moes_;             // what MoeHandle::impl points to
  std::deque<PackedWeight> packed_;         // panels the views point into
  std::deque<Int4Packed> int4_;             // repacked INT4 the views point into
  std::unique_ptr<PackedWeightCacheReader> cache_reader_;
  std::unique_ptr<PackedWeightCacheWriter> cache_writer_;
  std::filesystem::path cache_file_;
  std::string cache_note_;  // why the cache was (not) used, for the log
  int64_t cache_hits_ = 0;
  bool cache_stale_ = false;
  int64_t packed_linears_ = 0;
  int64_t packed_bytes_ = 0;
  double pack_seconds_ = 0;
};

}  // namespace fp4serve::kernels::cpu
