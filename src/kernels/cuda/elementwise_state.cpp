#include "kernels/cuda/elementwise_state.h"

#include <stdexcept>
#include <string>

namespace fp4serve::kernels::cuda {
namespace {

// A zeroing job passes src == nullptr and copy == false.
void add(std::vector<StateCopyJob>& jobs, void* dst, const void* src, bool copy, uint64_t bytes, const char* op,
         std::size_t layer) {
  if (bytes == 0) return;
  if (dst == nullptr || (copy && src == nullptr))
    throw std::invalid_argument(std::string(op) + ": a null state pointer at layer " + std::to_string(layer));
  if (dst == src) return;
  jobs.push_back({dst, src, bytes});
}

}  // namespace

std::vector<StateCopyJob> state_copy_jobs(std::span<const GdnStateRef> dst, std::span<const GdnStateRef> src,
                                     const GdnDims& d) {
  if (dst.size() != src.size()) throw std::invalid_argument("state_copy: layer counts differ");
  const auto conv = static_cast<uint64_t>(d.conv_state_elems()) * sizeof(uint16_t);
  const auto ssm = static_cast<uint64_t>(d.state_elems()) * sizeof(float);
  std::vector<StateCopyJob> jobs;
  jobs.reserve(2 * dst.size());
  for (std::size_t l = 0; l < dst.size(); ++l) {
    add(jobs, dst[l].conv, src[l].conv, true, conv, "state_copy", l);
    add(jobs, dst[l].ssm, src[l].ssm, true, ssm, "state_copy", l);
  }
  return jobs;
}

std::vector<StateCopyJob> state_zero_jobs(std::span<const GdnStateRef> dst, const GdnDims& d) {
  const auto conv = static_cast<uint64_t>(d.conv_state_elems()) * sizeof(uint16_t);
  const auto ssm = static_cast<uint64_t>(d.state_elems()) * sizeof(float);
  std::vector<StateCopyJob> jobs;
  jobs.reserve(2 * dst.size());
  for (std::size_t l = 0; l < dst.size(); ++l) {
    add(jobs, dst[l].conv, nullptr, false, conv, "state_zero", l);
    add(jobs, dst[l].ssm, nullptr, false, ssm, "state_zero", l);
  }
  return jobs;
}

}  // namespace fp4serve::kernels::cuda
