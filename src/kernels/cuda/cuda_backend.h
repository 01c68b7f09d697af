// The CUDA backend: backend.h's op table on one NVIDIA GPU (sm_90a Hopper, sm_120a consumer and
// workstation Blackwell). One stream; every op enqueues its kernels and returns; download(),
// synchronize() and sample() wait (sample_async does not: its wait_sample waits for its results
// alone). Each op's kernels live in their own file pair beside this one
// (norm_cuda, rope_cuda, elementwise_cuda, linear_cuda, moe_cuda, gdn_cuda, attention_cuda,
// sampling_cuda), as twins of the CPU backend's (cpu/).
//
// Numerics contract: data movement (embedding, copies, gather, KV write, state copy) is bit-identical
// to the CPU op; every other op is held to tests/unit/kernels/backend_ops_harness.h's per-op NMSE
// threshold against the CPU op, and is bit-identical to itself whatever the batch composition (each
// output row is one fixed-order computation over its own inputs: no M-dependent split-K, no atomics
// in a reduction). Reductions that the CPU does in its canonical 32-lane order (kernel_table.h:
// norms, attention scores) are done in that order by one warp, so most of them match bit for bit.
//
// Weights (weight_upload.h) are packed into pinned staging buffers and copied on a stream of their own;
// every op and transfer first makes the compute stream wait for the copies staged so far.
//
// Memory (device_arena.h): weights in a bump arena, model buffers one cudaMalloc each at start-up,
// op temporaries in a scratch arena sized by reserve(), per-call descriptors through a pinned
// staging ring: no cudaMalloc in a step within the reserved limits.
#pragma once

#include <memory>
#include <string>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_context.h"

namespace fp4serve::kernels::cuda {

class AsyncSampling;  // sampling_cuda.h
class GraphInstance;  // step_graph.h

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int ordinal = 0);
  ~CudaBackend() override;

  CudaContext& context() { return *ctx_; }
  const DeviceInfo& info() const { return ctx_->info; }

  Device device() const override { return Device::kCuda; }
  std::string describe() const override;
  void reserve(const StepLimits& limits, const ModelShape& shape) override;

  // Step graphs (step_graph.h, graph_recorder.h). The capture executes nothing: the forward's ops are
  // recorded into a graph, instantiated once; each replay re-runs the forward on the host in fill mode
  // (uploads into the graph's slots, every launch checked against the capture), then launches it.
  std::unique_ptr<StepGraph> capture_step(const std::function<void()>& forward) override;
  void replay_step(StepGraph& graph, const std::function<void()>& forward) override;

  DeviceBuffer allocate(std::size_t bytes, std::string_view what) override;
  void upload(const TensorView& dst, const void* host) override;
  void download(void* host, const TensorView& src) override;
  void copy(const TensorView& dst, const TensorView& src) override;
  void zero(const TensorView& dst) override;
  void synchronize() override;

  LinearHandle prepare_linear(const WeightView& w, const ReleaseSource& release = {}) override;
  MoeHandle prepare_moe(const MoeWeights& moe, const ReleaseSource& release = {}) override;
  TensorView prepare_tensor(const TensorView& host) override;
  // Ends loading (waits for the weight copies, frees the staging buffers) and says what was
  // uploaded, in how long, at what rate.
  std::string weights_summary() const override;
  // The bytes the whole load is expected to upload, for the progress line's "done / total" (optional).
  void expect_weight_bytes(std::size_t bytes);

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
  // The results land in pinned memory behind an event; wait_sample waits for that event, not the stream.
  SampleTicket sample_async(const TensorView& logits, std::span<const SampleRow> rows, const SamplingConfig& config,
                            std::span<SampleResult> out) override;
  void wait_sample(SampleTicket ticket) override;

 private:
  // Runs one op: scratch reset, the op's name kept for errors reported later, and with
  // FP4SERVE_CUDA_SYNC=1 a synchronize that attributes a fault to this op.
  template <class F>
  void run_op(const char* name, F&& body);

  // One capture of a step graph (capture_step captures each of its instances).
  std::unique_ptr<GraphInstance> capture_instance(const std::function<void()>& forward);

  std::unique_ptr<CudaContext> ctx_;
  std::unique_ptr<AsyncSampling> async_sampling_;  // made on the first sample_async
  int64_t linears_ = 0, moes_ = 0, tensors_ = 0;
  std::size_t buffer_bytes_ = 0;
};

// A CUDA backend on device `ordinal`, or nullptr when this machine has no usable CUDA device (no
// driver, no GPU): callers fall back or skip. Errors other than "no device" throw.
std::unique_ptr<Backend> make_cuda_backend_if_present(int ordinal = 0);

}  // namespace fp4serve::kernels::cuda
