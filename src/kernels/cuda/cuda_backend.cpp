#include "kernels/cuda/cuda_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <stdexcept>

#include "kernels/cuda/attention_cuda.h"
#include "kernels/cuda/attention_plan.h"
#include "kernels/cuda/cuda_error.h"
#include "kernels/cuda/elementwise_cuda.h"
#include "kernels/cuda/gdn_cuda.h"
#include "kernels/cuda/linear_cuda.h"
#include "kernels/cuda/moe_cuda.h"
#include "kernels/cuda/moe_plan.h"
#include "kernels/cuda/norm_cuda.h"
#include "kernels/cuda/rope_cuda.h"
#include "kernels/cuda/sampling_cuda.h"
#include "kernels/cuda/step_graph.h"

namespace fp4serve::kernels::cuda {
namespace {

// Every view an op reads or writes must be device memory of this backend: a host view handed to a
// kernel would fault far from the mistake.
void expect_cuda(std::initializer_list<const TensorView*> views, const char* op) {
  for (const TensorView* v : views)
    if (v->data != nullptr && v->device != Device::kCuda)
      throw std::invalid_argument(std::string("CudaBackend::") + op + ": a " + describe_view(*v) +
                                  " view in host memory (allocate, upload or prepare it on the CUDA backend)");
}

bool is_pinned_host(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeHost;
}

// Rows and row pitch of a view that is contiguous or a 2-D matrix with strided rows.
struct Rows2d {
  std::size_t rows = 1, width = 0, pitch = 0;
};
Rows2d rows_2d(const TensorView& v, const char* op) {
  const std::size_t es = v.element_size();
  if (v.is_contiguous()) return {1, v.bytes(), v.bytes()};
  if (v.rank == 2 && v.stride[1] == 1)
    return {static_cast<std::size_t>(v.shape[0]), static_cast<std::size_t>(v.shape[1]) * es,
            static_cast<std::size_t>(v.stride[0]) * es};
  throw std::invalid_argument(std::string("CudaBackend::") + op + ": a view that is neither contiguous nor 2-D with strided rows");
}

// Calls that wait for the device or allocate cannot be part of a captured step (and would read stale
// data in a replay's fill): a forward that makes one is not graph-safe.
void expect_eager(const CudaContext& ctx, const char* op) {
  if (ctx.graph.mode() != GraphMode::kEager)
    throw std::logic_error(std::string("CudaBackend::") + op +
                           " inside a step graph's forward (capture_step / replay_step): it waits for the device");
}

}  // namespace

CudaBackend::CudaBackend(int ordinal) : ctx_(std::make_unique<CudaContext>(query_device(ordinal))) {}

CudaBackend::~CudaBackend() = default;

template <class F>
void CudaBackend::run_op(const char* name, F&& body) {
  const bool eager = ctx_->graph.mode() == GraphMode::kEager;
  // No op reads a weight before its copy is done (capture_step fences once before capturing: an
  // event of another stream cannot be waited on inside the capture).
  if (eager) ctx_->loader.fence(ctx_->stream);
  ctx_->scratch.reset();
  ctx_->last_op = name;
  body();
  if (eager && ctx_->sync_each_op) check(cudaStreamSynchronize(ctx_->stream), name, "FP4SERVE_CUDA_SYNC");
}

std::string CudaBackend::describe() const { return "cuda " + ctx_->info.describe(); }

void CudaBackend::reserve(const StepLimits& l, const ModelShape& m) {
  // The largest temporaries of one op within the limits, each from its module's own planner: the
  // MoE block's scratch plan at max_tokens (moe_plan.h) and attention's split-KV partials (the
  // budget attention_plan.h caps them at). Ops that need less share the block; an op that needs more
  // grows it once (logged).
  std::size_t need = attn::kSplitBudgetBytes;
  if (m.experts > 0 && m.top_k > 0 && m.hidden > 0 && m.moe_intermediate > 0) {
    MoeDims d;
    d.tokens = std::max<int64_t>(1, l.max_tokens);
    d.hidden = m.hidden;
    d.intermediate = m.moe_intermediate;
    d.shared_intermediate = m.shared_intermediate;
    d.experts = m.experts;
    d.top_k = m.top_k;
    need = std::max(need, plan_moe(d).total);
  }
  ctx_->scratch.reserve(need + (std::size_t{16} << 20));
  ctx_->max_context = std::max(ctx_->max_context, l.max_context);
  ctx_->max_seqs = std::max(ctx_->max_seqs, l.max_seqs);
}

// ---- step graphs -------------------------------------------------------------------------------

std::unique_ptr<StepGraph> CudaBackend::capture_step(const std::function<void()>& forward) {
  expect_eager(*ctx_, "capture_step");
  if (ctx_->max_context <= 0)
    throw std::logic_error("CudaBackend::capture_step: call reserve() first (its limits size the graphs' block tables)");
  ctx_->loader.fence(ctx_->stream);
  auto graph = std::make_unique<CudaStepGraph>();
  for (auto& instance : graph->instances) instance = capture_instance(forward);
  return graph;
}

std::unique_ptr<GraphInstance> CudaBackend::capture_instance(const std::function<void()>& forward) {
  // A capture that grew the scratch arena recorded addresses of the old block for the ops before the
  // growth: capture once more, the arena now large enough for every op.
  for (int attempt = 0;; ++attempt) {
    auto instance = std::make_unique<GraphInstance>();
    const int growths = ctx_->scratch.growths();
    // Thread-local mode: a synchronize, read back or allocation on this thread inside the forward
    // fails the capture (a non-graph-safe op is found at start-up), while other threads using CUDA
    // (none do today) are not affected as they would be in global mode.
    check(cudaStreamBeginCapture(ctx_->stream, cudaStreamCaptureModeThreadLocal), "capture_step", "begin capture");
    GraphInstance* in = instance.get();
    ctx_->graph.begin_capture(in->recording, [in](UploadSlot& slot, bool device) { in->allocate_slot(slot, device); });
    reset_graph_tables(*ctx_);
    cudaGraph_t captured = nullptr;
    try {
      forward();
      ctx_->graph.end();
    } catch (...) {
      ctx_->graph.abort();
      cudaStreamEndCapture(ctx_->stream, &captured);
      if (captured) cudaGraphDestroy(captured);
      cudaGetLastError();
      throw;
    }
    check(cudaStreamEndCapture(ctx_->stream, &captured), "capture_step",
          "end capture (an op synchronized, read back or allocated inside the captured forward)");
    instance->instantiate(captured);
    if (ctx_->scratch.growths() == growths || attempt > 0) return instance;
  }
}

void CudaBackend::replay_step(StepGraph& graph, const std::function<void()>& forward) {
  auto* g = dynamic_cast<CudaStepGraph*>(&graph);
  if (g == nullptr) throw std::invalid_argument("CudaBackend::replay_step: a graph captured by another backend");
  expect_eager(*ctx_, "replay_step");
  GraphInstance& in = g->next();
  in.wait_idle();  // its last replay's copies read the slots we are about to fill
  ctx_->graph.begin_fill(in.recording);
  reset_graph_tables(*ctx_);
  try {
    forward();
  } catch (...) {
    ctx_->graph.abort();
    throw;
  }
  ctx_->graph.end();  // throws when the forward did less than the capture
  ctx_->loader.fence(ctx_->stream);
  in.launch(ctx_->stream);
  ctx_->last_op = "step graph replay";
}

// ---- memory ------------------------------------------------------------------------------------

DeviceBuffer CudaBackend::allocate(std::size_t bytes, std::string_view what) {
  expect_eager(*ctx_, "allocate");
  if (bytes == 0) return DeviceBuffer({}, 0, Device::kCuda);
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), "allocate", std::string(what) + ": " + std::to_string(bytes) + " bytes",
        fmt::format("{} bytes of buffers so far", buffer_bytes_));
  std::shared_ptr<void> mem(p, [](void* q) { cudaFree(q); });
  check(cudaMemsetAsync(p, 0, bytes, ctx_->stream), "allocate", std::string(what));
  check(cudaStreamSynchronize(ctx_->stream), "allocate", std::string(what));
  buffer_bytes_ += bytes;
  return DeviceBuffer(std::move(mem), bytes, Device::kCuda);
}

void CudaBackend::upload(const TensorView& dst, const void* host) {
  expect_cuda({&dst}, "upload");
  if (!dst.is_contiguous()) throw std::invalid_argument("CudaBackend::upload: destination is not contiguous");
  if (dst.dtype == DType::kI32) {  // token ids, checked by embedding on the host (CudaContext::last_ids)
    const auto* ids = static_cast<const int32_t*>(host);
    ctx_->last_ids.assign(ids, ids + dst.numel());
    ctx_->last_ids_device = dst.data;
  }
  if (ctx_->graph.mode() != GraphMode::kEager) {
    // The captured forward's upload: its bytes in a pinned slot of the graph, copied by a node.
    UploadSlot& slot = ctx_->graph.next_upload(dst.bytes(), "upload", false);
    std::memcpy(slot.host, host, dst.bytes());
    memcpy_async(*ctx_, "upload", dst.data, slot.host, dst.bytes(), cudaMemcpyHostToDevice);
    return;
  }
  ctx_->loader.fence(ctx_->stream);
  // From pageable memory the copy returns once the bytes are staged, so the caller may reuse `host`;
  // pinned memory is read later by the DMA, so then wait.
  check(cudaMemcpyAsync(dst.data, host, dst.bytes(), cudaMemcpyHostToDevice, ctx_->stream), "upload", dst);
  if (is_pinned_host(host)) check(cudaStreamSynchronize(ctx_->stream), "upload", dst);
}

void CudaBackend::download(void* host, const TensorView& src) {
  expect_cuda({&src}, "download");
  expect_eager(*ctx_, "download");
  if (!src.is_contiguous()) throw std::invalid_argument("CudaBackend::download: source is not contiguous");
  ctx_->loader.fence(ctx_->stream);  // a prepared tensor read back
  check(cudaMemcpyAsync(host, src.data, src.bytes(), cudaMemcpyDeviceToHost, ctx_->stream), "download", src);
  check(cudaStreamSynchronize(ctx_->stream), "download (or an op before it: " + ctx_->last_op + ")", src);
}

void CudaBackend::copy(const TensorView& dst, const TensorView& src) {
  expect_cuda({&dst, &src}, "copy");
  if (dst.dtype != src.dtype || dst.numel() != src.numel())
    throw std::invalid_argument("CudaBackend::copy: views differ in type or size");
  run_op("copy", [&] {
    const Rows2d d = rows_2d(dst, "copy"), s = rows_2d(src, "copy");
    if (d.rows == 1 && s.rows == 1) {
      memcpy_async(*ctx_, "copy", dst.data, src.data, src.bytes(), cudaMemcpyDeviceToDevice);
      return;
    }
    if (d.rows != s.rows && d.rows != 1 && s.rows != 1)
      throw std::invalid_argument("CudaBackend::copy: strided views of different row counts");
    const std::size_t rows = std::max(d.rows, s.rows);
    const std::size_t width = (d.rows == 1 ? s.width : d.width);
    memcpy2d_async(*ctx_, "copy", dst.data, d.rows == 1 ? width : d.pitch, src.data, s.rows == 1 ? width : s.pitch,
                   width, rows, cudaMemcpyDeviceToDevice);
  });
}

void CudaBackend::zero(const TensorView& dst) {
  expect_cuda({&dst}, "zero");
  run_op("zero", [&] {
    const Rows2d d = rows_2d(dst, "zero");
    if (d.rows == 1)
      memset_async(*ctx_, "zero", dst.data, dst.bytes());
    else
      memset2d_async(*ctx_, "zero", dst.data, d.pitch, d.width, d.rows);
  });
}

void CudaBackend::synchronize() {
  expect_eager(*ctx_, "synchronize");
  ctx_->loader.fence(ctx_->stream);
  check(cudaStreamSynchronize(ctx_->stream), "synchronize (fault in or before op " + ctx_->last_op + ")");
  ctx_->scratch.release_retired();
}

// ---- weights -----------------------------------------------------------------------------------

LinearHandle CudaBackend::prepare_linear(const WeightView& w, const ReleaseSource& release) {
  // Packed and staged through the loader; the checkpoint's pages go as soon as the weight is staged.
  LinearHandle h = cuda::prepare_linear(*ctx_, w, release);
  ++linears_;
  return h;
}

MoeHandle CudaBackend::prepare_moe(const MoeWeights& moe, const ReleaseSource& release) {
  // Each expert's pages are released as soon as it is staged, not at the end of the block.
  MoeHandle h = cuda::prepare_moe(*ctx_, moe, release);
  ++moes_;
  return h;
}

TensorView CudaBackend::prepare_tensor(const TensorView& host) {
  if (!host.is_contiguous()) throw std::invalid_argument("CudaBackend::prepare_tensor: host view is not contiguous");
  TensorView d = host;
  d.device = Device::kCuda;
  d.data = ctx_->weights.allocate(host.bytes(), "tensor");
  ctx_->loader.upload_bytes(d.data, host.data, host.bytes(), "tensor");
  ++tensors_;
  return d;
}

void CudaBackend::expect_weight_bytes(std::size_t bytes) { ctx_->loader.progress().expect_total(bytes); }

std::string CudaBackend::weights_summary() const {
  // The end of loading: the copies are waited for here (the loader's buffers go), so the figure is
  // the time to the last byte on the device.
  ctx_->loader.finish(ctx_->stream);
  return fmt::format("{} linears, {} MoE blocks, {} tensors on {} ({:.2f} GiB of weights); {}", linears_, moes_, tensors_,
                     ctx_->info.name, static_cast<double>(ctx_->weights.used()) / (1u << 30),
                     ctx_->loader.progress().summary());
}

// ---- ops ---------------------------------------------------------------------------------------

void CudaBackend::embedding(const TensorView& table, const TensorView& ids, const TensorView& out) {
  expect_cuda({&table, &ids, &out}, "embedding");
  run_op("embedding", [&] { cuda::embedding(*ctx_, table, ids, out); });
}
void CudaBackend::rmsnorm(const TensorView& x, const TensorView& w, float eps, NormKind kind, const TensorView& out) {
  expect_cuda({&x, &w, &out}, "rmsnorm");
  run_op("rmsnorm", [&] { cuda::rmsnorm(*ctx_, x, w, eps, kind, out); });
}
void CudaBackend::rmsnorm_gated(const TensorView& x, const TensorView& z, const TensorView& w, float eps,
                                const TensorView& out) {
  expect_cuda({&x, &z, &w, &out}, "rmsnorm_gated");
  run_op("rmsnorm_gated", [&] { cuda::rmsnorm_gated(*ctx_, x, z, w, eps, out); });
}
void CudaBackend::linears(const TensorView& x, std::span<const LinearOut> outs) {
  expect_cuda({&x}, "linears");
  for (const LinearOut& o : outs) expect_cuda({&o.out}, "linears");
  run_op("linears", [&] { cuda::linears(*ctx_, x, outs); });
}
void CudaBackend::to_bf16(const TensorView& x, const TensorView& out) {
  expect_cuda({&x, &out}, "to_bf16");
  run_op("to_bf16", [&] { cuda::to_bf16(*ctx_, x, out); });
}
void CudaBackend::round_bf16(const TensorView& x) {
  expect_cuda({&x}, "round_bf16");
  run_op("round_bf16", [&] { cuda::round_bf16(*ctx_, x); });
}
void CudaBackend::residual_add(const TensorView& x, const TensorView& y) {
  expect_cuda({&x, &y}, "residual_add");
  run_op("residual_add", [&] { cuda::residual_add(*ctx_, x, y); });
}
void CudaBackend::rope(const TensorView& x, const TensorView& positions, const RopeConfig& cfg) {
  expect_cuda({&x, &positions}, "rope");
  run_op("rope", [&] { cuda::rope(*ctx_, x, positions, cfg); });
}
void CudaBackend::kv_write(std::span<const AttentionSeqDesc> seqs, const TensorView& k, const TensorView& v) {
  expect_cuda({&k, &v}, "kv_write");
  run_op("kv_write", [&] { cuda::kv_write(*ctx_, seqs, k, v); });
}
void CudaBackend::attention(std::span<const AttentionSeqDesc> seqs, const TensorView& q, const TensorView& gate,
                            const TensorView& out, AttentionMath math) {
  expect_cuda({&q, &gate, &out}, "attention");
  run_op("attention", [&] { cuda::attention(*ctx_, seqs, q, gate, out, math); });
}
void CudaBackend::gdn_gating(const TensorView& a, const TensorView& b, const TensorView& A_log,
                             const TensorView& dt_bias, const TensorView& g, const TensorView& beta) {
  expect_cuda({&a, &b, &A_log, &dt_bias, &g, &beta}, "gdn_gating");
  run_op("gdn_gating", [&] { cuda::gdn_gating(*ctx_, a, b, A_log, dt_bias, g, beta); });
}
void CudaBackend::gdn_sequences(const GdnDims& dims, const TensorView& conv_weight, std::span<const GdnSeqDesc> seqs,
                                const TensorView& x, const TensorView& g, const TensorView& beta,
                                const TensorView& qkv_out, const TensorView& core_out) {
  expect_cuda({&conv_weight, &x, &g, &beta, &qkv_out, &core_out}, "gdn_sequences");
  run_op("gdn_sequences", [&] { cuda::gdn_sequences(*ctx_, dims, conv_weight, seqs, x, g, beta, qkv_out, core_out); });
}
void CudaBackend::moe(const TensorView& x, const MoeHandle& moe, const TensorView& out) {
  expect_cuda({&x, &out}, "moe");
  run_op("moe", [&] { cuda::moe(*ctx_, x, moe, out); });
}
void CudaBackend::state_copy(std::span<const GdnStateRef> dst, std::span<const GdnStateRef> src, const GdnDims& dims) {
  run_op("state_copy", [&] { cuda::state_copy(*ctx_, dst, src, dims); });
}
void CudaBackend::state_zero(std::span<const GdnStateRef> dst, const GdnDims& dims) {
  run_op("state_zero", [&] { cuda::state_zero(*ctx_, dst, dims); });
}
void CudaBackend::gather_rows(const TensorView& x, std::span<const int64_t> rows, const TensorView& out) {
  expect_cuda({&x, &out}, "gather_rows");
  run_op("gather_rows", [&] { cuda::gather_rows(*ctx_, x, rows, out); });
}
void CudaBackend::layernorm(const TensorView& x, const TensorView& w, const TensorView& b, float eps,
                            const TensorView& out) {
  expect_cuda({&x, &w, &b, &out}, "layernorm");
  run_op("layernorm", [&] { cuda::layernorm(*ctx_, x, w, b, eps, out); });
}
void CudaBackend::bias_activation(const TensorView& x, const TensorView& bias, Activation act, const TensorView& out) {
  expect_cuda({&x, &bias, &out}, "bias_activation");
  run_op("bias_activation", [&] { cuda::bias_activation(*ctx_, x, bias, act, out); });
}
void CudaBackend::rope_table(const TensorView& x, const TensorView& cos, const TensorView& sin) {
  expect_cuda({&x, &cos, &sin}, "rope_table");
  run_op("rope_table", [&] { cuda::rope_table(*ctx_, x, cos, sin); });
}
void CudaBackend::dense_attention(std::span<const DenseSegment> segments, const TensorView& q, const TensorView& k,
                                  const TensorView& v, const TensorView& out, AttentionMath math) {
  expect_cuda({&q, &k, &v, &out}, "dense_attention");
  run_op("dense_attention", [&] { cuda::dense_attention(*ctx_, segments, q, k, v, out, math); });
}
void CudaBackend::sample(const TensorView& logits, std::span<const SampleRow> rows, const SamplingConfig& config,
                         std::span<SampleResult> out) {
  expect_cuda({&logits}, "sample");
  expect_eager(*ctx_, "sample");
  run_op("sample", [&] { cuda::sample(*ctx_, logits, rows, config, out); });
}

Backend::SampleTicket CudaBackend::sample_async(const TensorView& logits, std::span<const SampleRow> rows,
                                                const SamplingConfig& config, std::span<SampleResult> out) {
  expect_cuda({&logits}, "sample_async");
  expect_eager(*ctx_, "sample_async");  // sampling follows a step graph's replay, never inside it
  if (!async_sampling_) async_sampling_ = std::make_unique<AsyncSampling>();
  uint64_t ticket = 0;
  run_op("sample_async", [&] { ticket = async_sampling_->launch(*ctx_, logits, rows, config, out); });
  return SampleTicket{ticket};
}

void CudaBackend::wait_sample(SampleTicket ticket) {
  expect_eager(*ctx_, "wait_sample");
  if (!async_sampling_) return;  // nothing was launched
  async_sampling_->finish(*ctx_, ticket.id);
}

std::unique_ptr<Backend> make_cuda_backend_if_present(int ordinal) {
  if (device_count() <= ordinal) return nullptr;
  return std::make_unique<CudaBackend>(ordinal);
}

}  // namespace fp4serve::kernels::cuda
