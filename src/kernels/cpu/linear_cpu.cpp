#include <stdexcept>
#include <string>

#include "kernels/bf16.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/thread_scratch.h"
#include "kernels/cpu/linear_cpu.h"

namespace fp4serve::kernels {
namespace {

// Rows per work item. Small enough to balance GEMVs with a few hundred rows over many cores; a
// packed weight's item is one panel.
constexpr int64_t kRowBlock = 8;


bool runs_packed(const LinearJob& j, const cpu::KernelTable& kt) {
  return j.w.packed != nullptr && kt.linear_packed != nullptr;
}

void check_job(const LinearJob& j) {
  if (j.x == nullptr || j.y == nullptr || j.M < 0)
    throw std::invalid_argument("linear: null input/output or negative M");
  if (j.ldx < j.w.k || j.ldy < j.w.n)
    throw std::invalid_argument("linear: row stride smaller than the row (ldx " + std::to_string(j.ldx) + " < K " +
                                std::to_string(j.w.k) + " or ldy " + std::to_string(j.ldy) + " < N " +
                                std::to_string(j.w.n) + ")");
  if (j.w.data == nullptr) throw std::invalid_argument("linear: weight view without data");
}

}  // namespace

void linear_batch(std::span<const LinearJob> jobs, Isa isa) {
  const cpu::KernelTable& kt = cpu::kernel_table(isa);
  int64_t* first_block = cpu::scratch<int64_t>(cpu::Scratch::kLinearBlocks, 2 * jobs.size() + 1);
  int64_t* rows_per_block = first_block + jobs.size() + 1;
  first_block[0] = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    check_job(jobs[i]);
    rows_per_block[i] = runs_packed(jobs[i], kt) ? kPanelRows : kRowBlock;
    const int64_t blocks = jobs[i].M > 0 ? (jobs[i].w.n + rows_per_block[i] - 1) / rows_per_block[i] : 0;
    first_block[i + 1] = first_block[i] + blocks;
  }
  const int64_t total = first_block[jobs.size()];
  cpu::parallel_for(total, 1, [&](int64_t b0, int64_t b1) {
    // One kernel call per run of consecutive blocks of the same job (per-call setup amortized).
    size_t j = 0;
    for (int64_t b = b0; b < b1;) {
      while (first_block[j + 1] <= b) ++j;
      const LinearJob& job = jobs[j];
      const int64_t bend = std::min(b1, first_block[j + 1]);
      const int64_t n0 = (b - first_block[j]) * rows_per_block[j];
      const int64_t n1 = std::min(job.w.n, (bend - first_block[j]) * rows_per_block[j]);
      if (runs_packed(job, kt)) {
        const auto need = static_cast<size_t>(cpu::packed_linear_scratch_floats(job.M, job.w.packed->kp));
        kt.linear_packed(job.x, job.M, job.ldx, *job.w.packed, n0, n1, job.y, job.ldy,
                         cpu::scratch<float>(cpu::Scratch::kLinearTile, need));
      } else {
        const auto need = static_cast<size_t>(cpu::linear_scratch_floats(job.M, job.w.k));
        kt.linear(job.x, job.M, job.ldx, job.w, n0, n1, job.y, job.ldy,
                  cpu::scratch<float>(cpu::Scratch::kLinearTile, need));
      }
      b = bend;
    }
  });
}

void linear(const float* x, int64_t M, int64_t ldx, const WeightView& w, float* y, int64_t ldy, Isa isa) {
  LinearJob j;
  j.x = x;
  j.M = M;
  j.ldx = ldx;
  j.w = w;
  j.y = y;
  j.ldy = ldy;
  linear_batch(std::span<const LinearJob>(&j, 1), isa);
}

void linear_bf16(const uint16_t* x, int64_t M, const WeightView& w, float* y, Isa isa) {
  float* xf = cpu::scratch<float>(cpu::Scratch::kLinearX, static_cast<size_t>(M * w.k));
  bf16_to_f32(x, xf, M * w.k);
  linear(xf, M, w.k, w, y, w.n, isa);
}

}  // namespace fp4serve::kernels
