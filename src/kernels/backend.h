// The backend seam: the one interface between the model and the hardware (docs/ARCHITECTURE.md,
// "The backend seam"). The model's forward is written once against it; a backend owns memory, its
// stream and its kernels, and decides how weights are laid out for them.
//
//   memory   allocate() zero-filled device buffers (KV cache, GDN state slots and snapshots, the step
//            workspace, logits); upload/download/copy/zero move bytes; synchronize() waits for the
//            stream (the CPU backend runs every op to completion before returning, so its stream is
//            trivially in order).
//   weights  prepare_linear / prepare_moe / prepare_tensor take host views into the checkpoint (mmap)
//            at load time and return handles to the backend's own form: the CPU backend repacks
//            linears into panels for its tier and releases the checkpoint's pages; a GPU backend
//            uploads and reorders.
//   ops      a coarse op table, one call per model-level operation over TensorViews (tensor_view.h)
//            of device memory: embedding, the norms, a batch of linears sharing one input, bf16
//            conversion, residual add, RoPE, KV write, attention, the three GDN ops, the MoE block,
//            GDN state copy/zero, row gather, and sampling (sampling.h).
//
// Per-sequence arguments (which rows of the step belong to which sequence, its KV block table, its
// GDN state) travel as small host-side descriptor spans; the KV and state pointers inside them are
// device memory the backend allocated.
//
// Numerics contracts (each backend states its own, next to its declaration):
//   - the CPU backend (cpu/cpu_backend.h) is bit-exact to itself across batch composition, prefill
//     chunking, prefix-cache hits and thread count, and every ISA tier is tested against scalar;
//   - a GPU backend is held to a stated tolerance against the CPU op (tests/unit/kernels/backend_ops_test
//     measures NMSE per op, llama.cpp test-backend-ops style) and to bit-identity with itself across
//     batch composition.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "kernels/attention.h"
#include "kernels/gdn.h"
#include "kernels/moe.h"
#include "kernels/rope.h"
#include "kernels/sampling.h"
#include "kernels/tensor_view.h"
#include "kernels/vision.h"
#include "kernels/weights.h"

namespace fp4serve::kernels {

class Backend;

// Receives host byte ranges a backend no longer reads (see Backend::prepare_linear).
using ReleaseSource = std::function<void(std::span<const std::byte>)>;

// Device memory owned by a backend; freed when the last handle goes.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(std::shared_ptr<void> memory, std::size_t bytes, Device device)
      : memory_(std::move(memory)), bytes_(bytes), device_(device) {}
  void* data() const { return memory_.get(); }
  std::size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  // A contiguous view of part of the buffer: `count` elements of `dtype` from byte `offset`.
  TensorView view(DType dtype, std::initializer_list<int64_t> shape, std::size_t offset = 0) const;

 private:
  std::shared_ptr<void> memory_;
  std::size_t bytes_ = 0;
  Device device_ = Device::kCpu;
};

// A linear layer's weight W[n, k] in the backend's form (y = x @ W^T). Cheap to copy; the backend
// that prepared it owns what `impl` points to and must outlive it.
struct LinearHandle {
  const void* impl = nullptr;
  int64_t n = 0;
  int64_t k = 0;
  WeightLayout format = WeightLayout::kBf16;  // the checkpoint's format
};

// A sparse MoE block's weights (router, experts, shared expert) in the backend's form.
struct MoeHandle {
  const void* impl = nullptr;
  int64_t hidden = 0;
  int64_t experts = 0;
  int top_k = 0;
};

// One output of a linear batch: out[M, handle.n] (fp32) = x @ W^T.
struct LinearOut {
  LinearHandle w;
  TensorView out;
};

// The rows of a step that belong to one sequence, and where the sequence stands.
struct SeqRows {
  int64_t row0 = 0;  // first row of the sequence in the step's [T, ...] tensors
  int64_t rows = 0;  // its new tokens
  int64_t pos0 = 0;  // position of the first new token (= tokens already cached)
};

// A sequence's view of one attention layer's cache (kv.k/kv.v device memory).
struct AttentionSeqDesc {
  SeqRows seq;
  KvView kv;
};

// A sequence's GDN state for one layer, and the rows to run through it.
struct GdnSeqDesc {
  SeqRows seq;
  GdnStateRef state;
};

// What the workspace and kernels must be able to hold: fixed at start-up (--max-num-batched-tokens,
// --max-num-seqs, --max-model-len) so that no step allocates.
struct StepLimits {
  int64_t max_tokens = 0;       // rows of one step
  int64_t max_seqs = 0;         // sequences of one step
  int64_t max_logit_rows = 0;   // rows through the lm_head in one step (samples + verify rows)
  int64_t max_context = 0;      // tokens one sequence can reach (attention keys)
};

// The model's dimensions that size a backend's per-thread scratch (Backend::reserve).
struct ModelShape {
  int64_t hidden = 0;
  int64_t max_linear_k = 0;       // the widest input of any linear
  int64_t num_q_heads = 0, num_kv_heads = 0, head_dim = 0;
  int64_t experts = 0, top_k = 0, moe_intermediate = 0, shared_intermediate = 0;
  int64_t gdn_key_dim = 0, gdn_value_heads = 0, gdn_head_v_dim = 0;
};

enum class NormKind : uint8_t {
  kOnePlus,  // Qwen3_5MoeRMSNorm: out = bf16((x * r) * (1 + w))
};

// A step's device work recorded once and replayed with new inputs (CUDA graphs; Backend::capture_step).
class StepGraph {
 public:
  virtual ~StepGraph() = default;
  // Kernel launches and copies the graph holds (for the capture log).
  virtual std::size_t num_nodes() const = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual Device device() const = 0;
  // One line for logs and doctor, e.g. "cpu amx (AVX512-BF16 + AMX tiles), 2 threads".
  virtual std::string describe() const = 0;

  // Sizes what the ops need for steps within `limits` of a model of `shape` (per-thread scratch), so
  // that once each thread has run each op, no step allocates. Call once before serving; a step beyond
  // the limits still works but may allocate.
  virtual void reserve(const StepLimits& limits, const ModelShape& shape) = 0;

  // ---- memory ------------------------------------------------------------------------------
  // Zero-filled, 64-byte aligned. Large buffers are committed lazily where the device allows (the CPU
  // backend's pages are touched on first write), so a cache sized to the budget costs nothing until
  // used. `what` names the buffer in errors.
  virtual DeviceBuffer allocate(std::size_t bytes, std::string_view what) = 0;
  virtual void upload(const TensorView& dst, const void* host) = 0;          // dst.bytes() bytes
  virtual void download(void* host, const TensorView& src) = 0;              // src.bytes() bytes
  virtual void copy(const TensorView& dst, const TensorView& src) = 0;        // same shape; 2-D strided ok
  virtual void zero(const TensorView& dst) = 0;
  virtual void synchronize() = 0;

  // ---- weights (load time) -----------------------------------------------------------------
  // `w` views host memory (the checkpoint's mmap). When the backend has made its own copy it hands
  // the source's byte ranges (weight_source_bytes) to `release`, which may drop them from memory (the
  // checkpoint's release_pages); an empty `release` keeps them (a tied lm_head whose bytes the
  // embedding also reads, or memory that is not a file mapping).
  virtual LinearHandle prepare_linear(const WeightView& w, const ReleaseSource& release = {}) = 0;
  // The router's, experts' and shared expert's views in `moe` are host views as for prepare_linear.
  virtual MoeHandle prepare_moe(const MoeWeights& moe, const ReleaseSource& release = {}) = 0;
  // A small dense tensor (norm weights, conv weights, the embedding table) on the device. The CPU
  // backend returns `host` itself (no copy); `host` must then outlive the model.
  virtual TensorView prepare_tensor(const TensorView& host) = 0;
  // Called after the last prepare_*: a summary line for the start-up log ("136 linears packed ...").
  virtual std::string weights_summary() const = 0;

  // ---- step graphs (CUDA graphs; docs/ARCHITECTURE.md "Step graphs") ------------------------
  // capture_step runs `forward` once with the ops recording their device work instead of running it,
  // and returns the recording; nullptr when the backend has no graphs (the CPU backend).
  // replay_step runs `forward` again in fill mode -- every op packs and stages its per-call data
  // (descriptors, block tables, state pointers, uploads) exactly where the capture put it, launches
  // nothing -- then enqueues the recording. The contract that makes this valid: for the same graph,
  // `forward` calls the same ops with the same tensors, shapes and staged byte counts; everything a
  // step varies travels through staged data, never through a kernel argument or a grid size. A
  // backend checks each op's launches against the capture and throws where they differ.
  virtual std::unique_ptr<StepGraph> capture_step(const std::function<void()>& forward) {
    (void)forward;
    return nullptr;
  }
  virtual void replay_step(StepGraph& graph, const std::function<void()>& forward);

  // ---- ops ---------------------------------------------------------------------------------
  // out[t, :] = table[ids[t], :]; table [V, H] bf16, ids [T] i32, out [T, H] bf16. Throws for an id
  // outside the table.
  virtual void embedding(const TensorView& table, const TensorView& ids, const TensorView& out) = 0;
  // x, out [R, D] bf16 (may alias); w [D] f32 holding bf16 values.
  virtual void rmsnorm(const TensorView& x, const TensorView& w, float eps, NormKind kind, const TensorView& out) = 0;
  // Gated RMSNorm of GDN (norm.h's rmsnorm_gated): x, z, out [R, D] bf16; w [D] f32.
  virtual void rmsnorm_gated(const TensorView& x, const TensorView& z, const TensorView& w, float eps,
                             const TensorView& out) = 0;
  // Every outs[i].out [M, n_i] f32 = x @ W_i^T for x [M, K] bf16 (exact fp32 values of x), all in one
  // parallel region. Each result equals the linear alone (batch invariance of linear.h).
  virtual void linears(const TensorView& x, std::span<const LinearOut> outs) = 0;
  // out = bf16(x) elementwise (x f32, out bf16, same shape); round_bf16: in place on f32 values.
  virtual void to_bf16(const TensorView& x, const TensorView& out) = 0;
  virtual void round_bf16(const TensorView& x) = 0;
  // x = bf16(x + y), both [R, H] bf16.
  virtual void residual_add(const TensorView& x, const TensorView& y) = 0;
  // In place on x [T, heads, D] bf16 at positions [T] i64 (text RoPE: one position per token) or
  // [3, T] i64 (M-RoPE: the t, h and w axes; a row with three equal values rotates as [T] does).
  virtual void rope(const TensorView& x, const TensorView& positions, const RopeConfig& cfg) = 0;
  // Writes k, v [T, Hkv, D] bf16 rows of each sequence into its cache at its positions.
  virtual void kv_write(std::span<const AttentionSeqDesc> seqs, const TensorView& k, const TensorView& v) = 0;
  // Causal gated attention of each sequence's rows of q [T, Hq, D] and gate [T, Hq*D] into out
  // [T, Hq*D] bf16, over keys 0 .. pos0 + t of its cache (attention.h gives the numerics).
  virtual void attention(std::span<const AttentionSeqDesc> seqs, const TensorView& q, const TensorView& gate,
                         const TensorView& out, AttentionMath math = AttentionMath::kHfEager) = 0;
  // gdn.h's gating: a, b [T, Hv] f32 (bf16 values); A_log, dt_bias [Hv] f32; g, beta [T, Hv] f32.
  virtual void gdn_gating(const TensorView& a, const TensorView& b, const TensorView& A_log, const TensorView& dt_bias,
                          const TensorView& g, const TensorView& beta) = 0;
  // For each sequence of `seqs`: the causal conv over its rows [rows, C] of x (bf16) continuing from
  // its conv state, then the delta rule over the conv output with g/beta rows, recurrent state in
  // place. qkv_out [rows, C] bf16 receives the conv output; core_out [rows, Hv*dv] bf16 the rule's
  // output. The sequences are independent: two descs (with rows) must not share a state or a row
  // (checked), and every sequence gets the bits it would get alone. One call per layer runs the
  // step's sequences together; the model splits a sequence's rows at snapshot points (one call per
  // round of pieces) so the state can be read between calls: the recurrent form gives the same bits
  // however a sequence's tokens are split.
  virtual void gdn_sequences(const GdnDims& dims, const TensorView& conv_weight, std::span<const GdnSeqDesc> seqs,
                             const TensorView& x, const TensorView& g, const TensorView& beta,
                             const TensorView& qkv_out, const TensorView& core_out) = 0;
  // One sequence: gdn_sequences with one desc.
  void gdn_sequence(const GdnDims& dims, const TensorView& conv_weight, const GdnSeqDesc& seq, const TensorView& x,
                    const TensorView& g, const TensorView& beta, const TensorView& qkv_out,
                    const TensorView& core_out) {
    gdn_sequences(dims, conv_weight, std::span<const GdnSeqDesc>(&seq, 1), x, g, beta, qkv_out, core_out);
  }
  // x [T, H] bf16 -> out [T, H] bf16 through the sparse MoE block (moe.h's numerics).
  virtual void moe(const TensorView& x, const MoeHandle& moe, const TensorView& out) = 0;
  // GDN state of every layer: dst = src, or zero (conv and recurrent, dims' sizes).
  virtual void state_copy(std::span<const GdnStateRef> dst, std::span<const GdnStateRef> src, const GdnDims& dims) = 0;
  virtual void state_zero(std::span<const GdnStateRef> dst, const GdnDims& dims) = 0;
  // out[i, :] = x[rows[i], :] (host row indices), bf16 [*, H].
  virtual void gather_rows(const TensorView& x, std::span<const int64_t> rows, const TensorView& out) = 0;
  // ---- the vision tower's ops (vision.h gives the numerics) ---------------------------------
  // x, out [R, D] bf16 (may alias; rows may be strided); w, b [D] f32 holding bf16 values.
  virtual void layernorm(const TensorView& x, const TensorView& w, const TensorView& b, float eps,
                         const TensorView& out) = 0;
  // out [R, N] bf16 = act(bf16(x + bias)) for x [R, N] f32 (a linears() output) and bias [N] f32 (bf16
  // values; a view with data == nullptr: no bias).
  virtual void bias_activation(const TensorView& x, const TensorView& bias, Activation act, const TensorView& out) = 0;
  // In place on x [T, H, D] bf16 (token rows may be strided: q or k inside a fused qkv output);
  // cos, sin [T, D] f32.
  virtual void rope_table(const TensorView& x, const TensorView& cos, const TensorView& sin) = 0;
  // Non-causal attention within each segment: q, k, v [T, H, D] bf16 (token rows may be strided),
  // out [T, H*D] bf16. Rows outside every segment are left as they are.
  virtual void dense_attention(std::span<const DenseSegment> segments, const TensorView& q, const TensorView& k,
                               const TensorView& v, const TensorView& out,
                               AttentionMath math = AttentionMath::kHfEager) = 0;
  // One token (and its logprobs when asked) per row of logits [rows.size(), config.vocab_size] f32
  // (rows may be strided), results into `out`; sampling.h has the semantics and the numerics contract.
  virtual void sample(const TensorView& logits, std::span<const SampleRow> rows, const SamplingConfig& config,
                      std::span<SampleResult> out) = 0;

  // ---- sampling without waiting (async scheduling; docs/ARCHITECTURE.md "The engine loop") ---
  // sample() split in two: sample_async enqueues the op and returns before its results reach the
  // host; wait_sample(ticket) blocks until `out` (and every row's `top`) hold them. Everything sample()
  // reads -- the logits, the rows (their options and id spans) and `out` -- must stay valid and
  // unchanged until wait_sample. At most one sample_async may be outstanding per backend (the CUDA
  // backend throws on a second); other ops, a synchronous sample() included, may run in between. The
  // unseeded rows' engine draws (*config.engine_draws) are taken when the op is enqueued, as sample()
  // takes them. The default runs sample() at once and wait_sample does nothing (the CPU backend: its
  // ops complete before returning).
  struct SampleTicket {
    uint64_t id = 0;
  };
  virtual SampleTicket sample_async(const TensorView& logits, std::span<const SampleRow> rows,
                                    const SamplingConfig& config, std::span<SampleResult> out) {
    sample(logits, rows, config, out);
    return SampleTicket{};
  }
  virtual void wait_sample(SampleTicket ticket) { (void)ticket; }
};

// The process's default backend: the CPU backend on the best tier this machine has (capped by
// FP4SERVE_CPU_ISA), created on first use. Tools that build a model without choosing get this one.
Backend& default_backend();

}  // namespace fp4serve::kernels
