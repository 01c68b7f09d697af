#include "kernels/cuda/gdn_plan.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "kernels/backend.h"
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

GdnLaunch gdn_plan(const GdnDims& d, int64_t seqs, int64_t step_rows) {
  GdnLaunch p;
  p.seqs = seqs;
  p.step_rows = step_rows;
  p.conv_blocks = blocks_for(step_rows * d.conv_dim(), "gdn_sequences conv");
  p.state_blocks = blocks_for(seqs * d.conv_dim(), "gdn_sequences conv state");
  p.norm_blocks = blocks_for(step_rows * 2 * d.Hk, "gdn_sequences l2norm");
  p.decay_blocks = blocks_for(step_rows * d.Hv, "gdn_sequences decay");
  if (seqs * d.Hv > std::numeric_limits<int>::max())
    throw std::invalid_argument("gdn_sequences: too many sequences for one launch");
  p.rule_heads = static_cast<unsigned>(seqs * d.Hv);
  p.rule_tiles = static_cast<unsigned>((d.dv + kRuleCols - 1) / kRuleCols);
  p.rule_unrolled = d.dk == kGdnUnrolledDk;
  p.rule_smem = static_cast<std::size_t>(d.dk) * (kRuleCols + 4) * sizeof(float);
  p.chunk_smem = gdn_chunked::chunk_layout(d.dk).bytes;
  p.inv_floats = step_rows * 2 * d.Hk;
  p.decay_floats = step_rows * d.Hv;
  p.qscale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.dk)));
  return p;
}

bool gdn_takes_chunked(const GdnDims& d, int64_t rows, bool chunked_opt_in, std::size_t smem_optin) {
  return chunked_opt_in && rows >= kGdnChunk && d.dk <= kGdnChunkMaxDk &&
         gdn_chunked::chunk_layout(d.dk).bytes <= smem_optin;
}

void gdn_stage(const GdnDims& d, std::span<const GdnSeqDesc> seqs, int64_t step_rows, bool chunked_opt_in,
               std::size_t smem_optin, std::vector<std::byte>& out) {
  if (step_rows > std::numeric_limits<int32_t>::max() || seqs.size() > std::numeric_limits<int32_t>::max())
    throw std::invalid_argument("gdn_sequences: too many rows for one launch");
  const std::size_t head = seqs.size() * sizeof(GdnSeqDev);
  out.assign(head + static_cast<std::size_t>(step_rows) * sizeof(int32_t), std::byte{0});
  std::vector<int32_t> map(static_cast<std::size_t>(step_rows), -1);
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    const GdnSeqDesc& s = seqs[i];
    GdnSeqDev dev{};
    dev.row0 = s.seq.row0;
    dev.rows = static_cast<int32_t>(s.seq.rows);
    dev.chunked = gdn_takes_chunked(d, s.seq.rows, chunked_opt_in, smem_optin) ? 1 : 0;
    dev.state = s.state;
    std::memcpy(out.data() + i * sizeof(GdnSeqDev), &dev, sizeof dev);
    for (int64_t r = 0; r < s.seq.rows; ++r) map[static_cast<std::size_t>(s.seq.row0 + r)] = static_cast<int32_t>(i);
  }
  if (!map.empty()) std::memcpy(out.data() + head, map.data(), map.size() * sizeof(int32_t));
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
