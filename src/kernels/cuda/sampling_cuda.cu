// Sampling on CUDA: one block per logits row runs the CPU op's stages in its order
// (kernels/sampling.h): the edits (sampling_pack.h) written into the row -> greedy argmax or the
// random selection and draw -> the raw values put back -> the logprobs. The host packs the options
// and draws the uniforms, the kernel writes one result record per row, and one download plus one
// stream synchronize return them (sample() is the one op that waits).
// The per-row device code is in sampling_select.cuh.
#include "kernels/cuda/sampling_cuda.h"

#include <cuda_runtime.h>

#include <stdexcept>
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

}  // namespace

void sample(CudaContext& ctx, const TensorView& logits, std::span<const SampleRow> rows, const SamplingConfig& config,
            std::span<SampleResult> out) {
  if (out.size() != rows.size()) throw std::invalid_argument("sample: one result per row");
  if (rows.empty()) return;
  expect_view(logits, DType::kF32, {static_cast<int64_t>(rows.size()), config.vocab_size}, "sample logits");
  cpu::check_sample_call(rows, config, out);
  const int64_t stride = logits.stride[0];
  if (stride < config.vocab_size) throw std::invalid_argument("sample: rows overlap (stride below the row length)");

  HostBuffers& hb = host_buffers();
  PackedSampling& p = hb.packed;
  pack_sampling(rows, config, stride, p);

  KernelArgs a{};
  a.logits = static_cast<float*>(logits.data);
  a.rows = ctx.upload(std::span<const SampleRowParams>(p.rows), "sample rows");
  a.edits = ctx.upload(std::span<const SampleEdit>(p.edits), "sample edits");
  a.biases = ctx.upload(std::span<const float>(p.biases), "sample biases");
  a.masks = ctx.upload(std::span<const uint32_t>(p.masks), "sample masks");
  a.logprob_ids = ctx.upload(std::span<const int32_t>(p.logprob_ids), "sample logprob ids");
  a.saved = p.edits.empty() ? nullptr : ctx.scratch.take_n<float>(p.edits.size(), "sample saved logits");
  const std::size_t result_bytes = rows.size() * sizeof(SampleRowResult);
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

  hb.results.resize(result_bytes + top_bytes);
  check(cudaMemcpyAsync(hb.results.data(), device_results, hb.results.size(), cudaMemcpyDeviceToHost, ctx.stream),
        "sample", logits, "results");
  // Rows whose top-N is beyond the device's ranking: their (restored) raw rows come back too.
  hb.host_rows.resize(rows.size());
  for (std::size_t r = 0; r < rows.size(); ++r) {
    if (p.rows[r].logprobs != kLogprobsHost) continue;
    hb.host_rows[r].resize(static_cast<std::size_t>(p.valid));
    check(cudaMemcpyAsync(hb.host_rows[r].data(), a.logits + p.rows[r].logits_offset,
                          static_cast<std::size_t>(p.valid) * sizeof(float), cudaMemcpyDeviceToHost, ctx.stream),
          "sample", logits, "row " + std::to_string(r));
  }
  check(cudaStreamSynchronize(ctx.stream), "sample", logits, "rows " + std::to_string(rows.size()));

  const auto* res = reinterpret_cast<const SampleRowResult*>(hb.results.data());
  const auto* tops = reinterpret_cast<const SampleTopEntry*>(hb.results.data() + result_bytes);
  unpack_sampling(p, rows, std::span<const SampleRowResult>(res, rows.size()),
                  std::span<const SampleTopEntry>(tops, static_cast<std::size_t>(p.top_entries)), out);
  finish_host_logprobs(p, rows, hb.host_rows, config, out);
}

}  // namespace fp4serve::kernels::cuda
