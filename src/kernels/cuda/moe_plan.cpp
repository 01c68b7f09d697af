#include "kernels/cuda/moe_plan.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

#include "kernels/cuda/moe_sort.h"

namespace fp4serve::kernels::cuda {
namespace {

class Layout {
 public:
  MoeRegion take(int64_t elems, std::size_t elem_bytes) {
    const MoeRegion r{next_, static_cast<std::size_t>(elems) * elem_bytes};
    next_ += (r.bytes + kMoeAlign - 1) / kMoeAlign * kMoeAlign;
    return r;
  }
  std::size_t end() const { return next_; }
  void move_to(std::size_t offset) { next_ = offset; }

 private:
  std::size_t next_ = 0;
};

[[noreturn]] void bad(const std::string& what) { throw std::invalid_argument("moe: " + what); }

}  // namespace

MoePlan plan_moe(const MoeDims& d) {
  if (d.experts < 1 || d.experts > moe::kMaxExperts)
    bad(std::to_string(d.experts) + " experts (the CUDA kernels take 1.." + std::to_string(moe::kMaxExperts) + ")");
  if (d.top_k < 1 || d.top_k > d.experts) bad("top_k " + std::to_string(d.top_k) + " out of range");
  if (d.hidden < 1 || d.intermediate < 1 || d.shared_intermediate < 0 || d.tokens < 0) bad("non-positive sizes");
  // Rows and pair ids are int32 on the device, element offsets int64.
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (d.tokens > kMax / d.top_k || d.tokens > kMax / d.experts)
    bad(std::to_string(d.tokens) + " tokens exceed the kernels' int32 row indices");

  MoePlan p;
  const int64_t T = d.tokens, R = T * d.top_k, E = d.experts, H = d.hidden, I = d.intermediate;
  const int64_t Is = d.shared_intermediate;
  p.pairs = R;
  p.sort_chunks = (R + moe::kSortChunk - 1) / moe::kSortChunk;
  Layout l;
  p.logits = l.take(T * E, 4);
  p.idx = l.take(R, 4);
  p.weight = l.take(R, 4);
  p.hist = l.take(p.sort_chunks * E, 4);
  p.offsets = l.take(E + 1, 4);
  p.row_token = l.take(R, 4);
  p.row_of = l.take(R, 4);
  // The expert inputs (x_sorted, gate, up) are dead once SwiGLU has run, and down is written only
  // after it (by the down linear, which reads act): down takes their bytes. act must stay apart.
  p.act = l.take(R * I, 2);
  const std::size_t phase = l.end();
  p.x_sorted = l.take(R * H, 2);
  p.gate = l.take(R * I, 4);
  p.up = l.take(R * I, 4);
  const std::size_t inputs_end = l.end();
  l.move_to(phase);
  p.down = l.take(R * H, 4);
  l.move_to(std::max(inputs_end, l.end()));
  if (Is > 0) {
    // Likewise for the shared expert: s_down over s_gate and s_up; s_score and s_act apart.
    p.s_score = l.take(T, 4);
    p.s_act = l.take(T * Is, 2);
    const std::size_t s_phase = l.end();
    p.s_gate = l.take(T * Is, 4);
    p.s_up = l.take(T * Is, 4);
    const std::size_t s_inputs_end = l.end();
    l.move_to(s_phase);
    p.s_down = l.take(T * H, 4);
    l.move_to(std::max(s_inputs_end, l.end()));
  }
  p.total = l.end();
  return p;
}

MoeDims moe_dims(const MoeWeights& w) {
  // moe_cpu.cpp's check_weights.
  const int64_t E = static_cast<int64_t>(w.experts.size());
  if (w.router.n != E)
    bad("router has " + std::to_string(w.router.n) + " rows but " + std::to_string(E) + " experts were given");
  if (w.top_k <= 0 || w.top_k > E) bad("top_k out of range");
  const int64_t H = w.router.k;
  for (int64_t e = 0; e < E; ++e) {
    const ExpertWeights& x = w.experts[static_cast<std::size_t>(e)];
    if (x.gate.k != H || x.up.k != H || x.gate.n != x.up.n || x.down.k != x.gate.n || x.down.n != H)
      bad("expert " + std::to_string(e) + " has inconsistent gate/up/down shapes");
    if (x.gate.n != w.experts[0].gate.n) bad("expert " + std::to_string(e) + " has another intermediate size");
  }
  if (w.has_shared && (w.shared.gate.k != H || w.shared.down.n != H || w.shared_gate.n != 1 || w.shared_gate.k != H))
    bad("shared expert shapes do not match hidden size");
  if (w.has_shared && (w.shared.up.k != H || w.shared.up.n != w.shared.gate.n || w.shared.down.k != w.shared.gate.n))
    bad("shared expert has inconsistent gate/up/down shapes");
  if (w.has_shared && w.shared.gate.n < 1) bad("shared expert has no intermediate size");
  MoeDims d;
  d.hidden = H;
  d.experts = E;
  d.top_k = w.top_k;
  d.intermediate = E > 0 ? w.experts[0].gate.n : 0;
  d.shared_intermediate = w.has_shared ? w.shared.gate.n : 0;
  plan_moe(d);  // the kernels' limits
  return d;
}

int64_t moe_route_blocks(int64_t tokens) { return (tokens + kMoeRouteWarps - 1) / kMoeRouteWarps; }

}  // namespace fp4serve::kernels::cuda
