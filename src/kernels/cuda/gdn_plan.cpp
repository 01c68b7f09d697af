#include "kernels/cuda/gdn_plan.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_limits.h"
#include "kernels/cuda/gdn_chunked.cuh"

namespace fp4serve::kernels::cuda {
namespace {

unsigned blocks_for(int64_t threads, const char* what) {
  const int64_t b = (threads + kGdnThreads - 1) / kGdnThreads;
  if (b > std::numeric_limits<int>::max())
    throw std::invalid_argument(std::string(what) + ": too many rows for one launch");
  return static_cast<unsigned>(b);
}

}  // namespace

void gdn_check_dims(const GdnDims& d, const char* op) {
  const std::string o(op);
  if (d.Hk <= 0 || d.Hv <= 0 || d.Hv % d.Hk != 0)
    throw std::invalid_argument(o + ": Hv must be a positive multiple of Hk (Hk " + std::to_string(d.Hk) + ", Hv " +
                                std::to_string(d.Hv) + ")");
  if (d.dk < 1 || d.dk > kGdnMaxDk)
    throw std::invalid_argument(o + ": the CUDA kernels take key head sizes 1 .. " + std::to_string(kGdnMaxDk) +
                                ", got " + std::to_string(d.dk));
  if (d.dv < 1) throw std::invalid_argument(o + ": value head size must be positive");
  if (d.conv_kernel < 1 || d.conv_kernel > kGdnMaxConvKernel)
    throw std::invalid_argument(o + ": conv kernel size must be in [1, 16]");
}

int64_t gdn_row_stride(const TensorView& v, const char* what) {
  if (v.rank != 2 || v.stride[0] < v.shape[1])
    throw std::invalid_argument(std::string(what) + ": rows overlap (row stride below the row length)");
  return v.stride[0];
}

GdnLaunch gdn_plan(const GdnDims& d, int64_t rows, bool chunked_opt_in) {
  GdnLaunch p;
  p.rows = rows;
  p.conv_blocks = blocks_for(rows * d.conv_dim(), "gdn_sequence conv");
  p.state_blocks = blocks_for(d.conv_dim(), "gdn_sequence conv state");
  p.norm_blocks = blocks_for(rows * 2 * d.Hk, "gdn_sequence l2norm");
  p.decay_blocks = blocks_for(rows * d.Hv, "gdn_sequence decay");
  p.rule_heads = static_cast<unsigned>(d.Hv);
  p.rule_tiles = static_cast<unsigned>((d.dv + kRuleCols - 1) / kRuleCols);
  p.rule_unrolled = d.dk == kGdnUnrolledDk;
  p.rule_smem = static_cast<std::size_t>(d.dk) * (kRuleCols + 4) * sizeof(float);
  p.chunked = chunked_opt_in && rows >= kGdnChunk && d.dk <= kGdnChunkMaxDk;
  p.chunk_smem = gdn_chunked::chunk_layout(d.dk).bytes;
  p.inv_floats = rows * 2 * d.Hk;
  p.decay_floats = rows * d.Hv;
  p.qscale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.dk)));
  return p;
}

bool gdn_chunked_opt_in() {
  static const bool on = [] {
    const char* v = std::getenv("FP4SERVE_GDN_CHUNKED");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  return on;
}

// The largest rule block (dk = kGdnMaxDk) runs without the shared-memory opt-in on either architecture.
static_assert(static_cast<std::size_t>(kGdnMaxDk) * (kRuleCols + 4) * sizeof(float) <= kMaxSmemDefault);

}  // namespace fp4serve::kernels::cuda
