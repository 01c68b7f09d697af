// Sampling on CUDA: one block per logits row runs the CPU op's stages in its order
// (kernels/sampling.h): the edits (sampling_pack.h) written into the row -> greedy argmax or the
// random selection and draw -> the raw values put back -> the logprobs. The host packs the options
// and draws the uniforms, the kernel writes one result record per row, and one download plus one
// stream synchronize return them (sample() is the one op that waits). AsyncSampling (the backend's
// sample_async) downloads into pinned memory behind an event instead and waits for that alone, later.
// The per-row device code is in sampling_select.cuh.
#include "kernels/cuda/sampling_cuda.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/sampling_cpu.h"
#include "kernels/cuda/cuda_error.h"
#include "kernels/cuda/graph_launch.cuh"
#include "kernels/cuda/sampling_block.cuh"
#include "kernels/cuda/sampling_pack.h"
#include "kernels/cuda/sampling_rules.h"
#include "kernels/cuda/sampling_select.cuh"

namespace fp4serve::kernels::cuda {

namespace {

using namespace sampling_block;
using namespace sampling_select;

// The token of each row on its path (sampling_select.cuh select_row).
template <int Path>
__global__ void __launch_bounds__(kSampleThreads, 1) select_kernel(KernelArgs a) {
  __shared__ Shared sh;
  select_row<Path>(a, sh);
}

// The logprobs of the rows that ask for them on the device, after the select kernels (same stream).
__global__ void __launch_bounds__(kSampleThreads, 1) logprobs_kernel(KernelArgs a) {
  __shared__ Shared sh;
  logprobs_row(a, sh);
}

// Per host thread: the packed call and the downloaded results, reused across calls.
struct HostBuffers {
  PackedSampling packed;
  std::vector<unsigned char> results;
  std::vector<std::vector<float>> host_rows;
};

HostBuffers& host_buffers() {
  thread_local HostBuffers b;
  return b;
}

// Checks and packs the call, enqueues the kernels and returns where their results are on the device
// (result_bytes of row records, then the top entries).
unsigned char* enqueue_sample(CudaContext& ctx, const TensorView& logits, std::span<const SampleRow> rows,
                              const SamplingConfig& config, std::span<SampleResult> out, PackedSampling& p,
                              std::size_t& result_bytes) {
  if (out.size() != rows.size()) throw std::invalid_argument("sample: one result per row");
  expect_view(logits, DType::kF32, {static_cast<int64_t>(rows.size()), config.vocab_size}, "sample logits");
  cpu::check_sample_call(rows, config, out);
  const int64_t stride = logits.stride[0];
  if (stride < config.vocab_size) throw std::invalid_argument("sample: rows overlap (stride below the row length)");
  pack_sampling(rows, config, stride, p);

  KernelArgs a{};
  a.logits = static_cast<float*>(logits.data);
  a.rows = ctx.upload(std::span<const SampleRowParams>(p.rows), "sample rows");
  a.edits = ctx.upload(std::span<const SampleEdit>(p.edits), "sample edits");
  a.biases = ctx.upload(std::span<const float>(p.biases), "sample biases");
  a.masks = ctx.upload(std::span<const uint32_t>(p.masks), "sample masks");
  a.logprob_ids = ctx.upload(std::span<const int32_t>(p.logprob_ids), "sample logprob ids");
  a.saved = p.edits.empty() ? nullptr : ctx.scratch.take_n<float>(p.edits.size(), "sample saved logits");
  result_bytes = rows.size() * sizeof(SampleRowResult);
  const std::size_t top_bytes = static_cast<std::size_t>(p.top_entries) * sizeof(SampleTopEntry);
  auto* device_results = static_cast<unsigned char*>(ctx.scratch.take(result_bytes + top_bytes, "sample results"));
  a.results = reinterpret_cast<SampleRowResult*>(device_results);
  a.tops = reinterpret_cast<SampleTopEntry*>(device_results + result_bytes);
  a.valid = p.valid;
  a.fixed_scale = p.fixed_scale;

  // One launch per selection path (a row's block exits at once in the others), then the logprobs.
  const auto grid = static_cast<unsigned>(rows.size());
  launch_kernel(ctx, "sample", select_kernel<kPathGreedyOrPlain>, grid, kSampleThreads, 0, a);
  check_launch("sample", logits, "rows " + std::to_string(rows.size()));
  launch_kernel(ctx, "sample top-k", select_kernel<kPathTopK>, grid, kSampleThreads, 0, a);
  check_launch("sample top-k", logits, "rows " + std::to_string(rows.size()));
  launch_kernel(ctx, "sample top-p", select_kernel<kPathTopP>, grid, kSampleThreads, 0, a);
  check_launch("sample top-p", logits, "rows " + std::to_string(rows.size()));
  launch_kernel(ctx, "sample logprobs", logprobs_kernel, grid, kSampleThreads, 0, a);
  check_launch("sample logprobs", logits, "rows " + std::to_string(rows.size()));
  return device_results;
}

// Rows whose top-N is beyond the device's ranking: their (restored) raw rows come back too (pageable
// memory: each copy returns once done).
void download_host_rows(CudaContext& ctx, const TensorView& logits, const PackedSampling& p,
                        std::vector<std::vector<float>>& host_rows) {
  host_rows.resize(p.rows.size());
  const auto* base = static_cast<const float*>(logits.data);
  for (std::size_t r = 0; r < p.rows.size(); ++r) {
    if (p.rows[r].logprobs != kLogprobsHost) continue;
    host_rows[r].resize(static_cast<std::size_t>(p.valid));
    check(cudaMemcpyAsync(host_rows[r].data(), base + p.rows[r].logits_offset,
                          static_cast<std::size_t>(p.valid) * sizeof(float), cudaMemcpyDeviceToHost, ctx.stream),
          "sample", logits, "row " + std::to_string(r));
  }
}

void unpack_all(const unsigned char* results, std::size_t result_bytes, const PackedSampling& p,
                std::span<const SampleRow> rows, std::span<std::vector<float>> host_rows,
                const SamplingConfig& config, std::span<SampleResult> out) {
  const auto* res = reinterpret_cast<const SampleRowResult*>(results);
  const auto* tops = reinterpret_cast<const SampleTopEntry*>(results + result_bytes);
  unpack_sampling(p, rows, std::span<const SampleRowResult>(res, rows.size()),
                  std::span<const SampleTopEntry>(tops, static_cast<std::size_t>(p.top_entries)), out);
  finish_host_logprobs(p, rows, host_rows, config, out);
}

}  // namespace

void sample(CudaContext& ctx, const TensorView& logits, std::span<const SampleRow> rows, const SamplingConfig& config,
            std::span<SampleResult> out) {
  if (out.size() != rows.size()) throw std::invalid_argument("sample: one result per row");
  if (rows.empty()) return;
  HostBuffers& hb = host_buffers();
  PackedSampling& p = hb.packed;
  std::size_t result_bytes = 0;
  unsigned char* device_results = enqueue_sample(ctx, logits, rows, config, out, p, result_bytes);
  const std::size_t top_bytes = static_cast<std::size_t>(p.top_entries) * sizeof(SampleTopEntry);
  hb.results.resize(result_bytes + top_bytes);
  check(cudaMemcpyAsync(hb.results.data(), device_results, hb.results.size(), cudaMemcpyDeviceToHost, ctx.stream),
        "sample", logits, "results");
  download_host_rows(ctx, logits, p, hb.host_rows);
  check(cudaStreamSynchronize(ctx.stream), "sample", logits, "rows " + std::to_string(rows.size()));
  unpack_all(hb.results.data(), result_bytes, p, rows, hb.host_rows, config, out);
}

// ---- AsyncSampling -----------------------------------------------------------------------------

struct AsyncSampling::State {
  PackedSampling packed;
  unsigned char* pinned = nullptr;  // the results' landing place (cudaHostAlloc), grown when short
  std::size_t pinned_bytes = 0;
  cudaEvent_t ready = nullptr;      // recorded after the results' copy
  std::vector<std::vector<float>> host_rows;
  // The outstanding call.
  uint64_t ticket = 0;
  bool pending = false;
  std::size_t result_bytes = 0;
  TensorView logits{};
  std::span<const SampleRow> rows;
  std::span<SampleResult> out;
  SamplingConfig config{};

  void reserve_pinned(std::size_t bytes) {
    if (bytes <= pinned_bytes) return;
    // Grows to the largest call seen (first steps only): the one allocation of this path.
    if (pinned) check(cudaFreeHost(pinned), "sample_async", "pinned results");
    pinned = nullptr;
    pinned_bytes = 0;
    const std::size_t size = std::max<std::size_t>(bytes, std::size_t{1} << 16);
    check(cudaHostAlloc(reinterpret_cast<void**>(&pinned), size, cudaHostAllocDefault), "sample_async",
          "pinned results " + std::to_string(size) + " bytes");
    pinned_bytes = size;
  }
};

AsyncSampling::AsyncSampling() : state_(std::make_unique<State>()) {
  // Blocking sync: the engine thread sleeps in finish() instead of spinning on the driver.
  check(cudaEventCreateWithFlags(&state_->ready, cudaEventDisableTiming | cudaEventBlockingSync), "sample_async",
        "event");
}

AsyncSampling::~AsyncSampling() {
  if (state_->ready) cudaEventDestroy(state_->ready);
  if (state_->pinned) cudaFreeHost(state_->pinned);
}

uint64_t AsyncSampling::launch(CudaContext& ctx, const TensorView& logits, std::span<const SampleRow> rows,
                               const SamplingConfig& config, std::span<SampleResult> out) {
  State& st = *state_;
  if (st.pending) throw std::logic_error("CudaBackend::sample_async: the previous call was not waited for");
  if (out.size() != rows.size()) throw std::invalid_argument("sample: one result per row");
  ++st.ticket;
  if (rows.empty()) return st.ticket;  // nothing to wait for
  std::size_t result_bytes = 0;
  unsigned char* device_results = enqueue_sample(ctx, logits, rows, config, out, st.packed, result_bytes);
  const std::size_t total = result_bytes + static_cast<std::size_t>(st.packed.top_entries) * sizeof(SampleTopEntry);
  // The previous call was finished, so its event has passed: the pinned buffer is free to reuse.
  st.reserve_pinned(total);
  check(cudaMemcpyAsync(st.pinned, device_results, total, cudaMemcpyDeviceToHost, ctx.stream), "sample_async",
        logits, "results");
  check(cudaEventRecord(st.ready, ctx.stream), "sample_async", logits, "record");
  st.pending = true;
  st.result_bytes = result_bytes;
  st.logits = logits;
  st.rows = rows;
  st.out = out;
  st.config = config;
  return st.ticket;
}

void AsyncSampling::finish(CudaContext& ctx, uint64_t ticket) {
  State& st = *state_;
  if (ticket != st.ticket) throw std::logic_error("CudaBackend::wait_sample: not the outstanding ticket");
  if (!st.pending) return;  // an empty call, or already waited for
  st.pending = false;
  check(cudaEventSynchronize(st.ready), "wait_sample (or an op before it: " + ctx.last_op + ")", st.logits, "results");
  bool host_rows = false;
  for (const SampleRowParams& r : st.packed.rows) host_rows = host_rows || r.logprobs == kLogprobsHost;
  if (host_rows) {
    // Rare (logprobs over more than kMaxDeviceTop entries): the rows are read back now, which waits.
    download_host_rows(ctx, st.logits, st.packed, st.host_rows);
    check(cudaStreamSynchronize(ctx.stream), "wait_sample", st.logits, "host rows");
  }
  unpack_all(st.pinned, st.result_bytes, st.packed, st.rows, st.host_rows, st.config, st.out);
}

}  // namespace fp4serve::kernels::cuda
