// Turning a processed logits row into one token, as vLLM V1 does after the logits processors
// (vllm/v1/sample/sampler.py Sampler.sample, ops/topk_topp_sampler.py):
//   greedy (temperature < 1e-5): argmax, first maximum on ties (torch.argmax);
//   random: logits / temperature (float32) -> min_p (argmax-invariant processor: drop tokens whose
//   probability is below min_p times the top probability) -> top-k (keep logits >= the k-th
//   largest, so ties at the boundary stay) -> top-p (over the top-k survivors' renormalised
//   probabilities, drop a token when the mass of the tokens ranked above it is >= top_p; the top
//   token always stays) -> draw from the softmax of what is left.
//
// Cost, for a vocabulary of V: every path is O(V) with no sort of the vocabulary.
//   - top-k: the row's max pass also records each 64-token block's max; a k-bounded heap then
//     visits only blocks whose max could enter it, over the raw logits (temperature scaling is
//     monotonic, so it is applied to the survivors, with an exact re-check of ties it could
//     create); top-p then runs over the k survivors, sorted;
//   - top-p without top-k: one pass of exp() fills per-bucket mass sums (buckets of 1/16 nat below
//     the max, monotonic in the logit); the bucket where the ranked mass crosses top_p is found
//     from the sums, every token above it is kept unsorted and only that bucket is sorted;
//   - neither: one pass of exp().
// The draw is inverse-CDF with one uniform u in [0, 1): the first kept token (in the candidates'
// order) whose running weight exceeds u * total. vLLM draws with the exponential trick instead
// (argmax(p / Exp(1) noise)); both sample exactly softmax of the kept logits, and ours needs one
// random number per step, which makes a seeded step a function of (seed, position) alone.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace fp4serve::kernels::cpu {

// torch.argmax: index of the first maximum (0 when every entry is -inf).
int32_t argmax_first(std::span<const float> row);
// Max of a row (vectorised; -inf for an empty row).
float row_max(std::span<const float> row);

struct RandomFilter {
  float temperature = 1.0f;  // > 0 (greedy rows never get here)
  int64_t top_k = 0;         // <= 0 or >= row size: off
  double top_p = 1.0;        // >= 1: off
  double min_p = 0.0;        // <= 0: off
};

struct Candidate {
  int32_t token;
  float scaled;  // logit / temperature
  float weight;  // exp(scaled - max scaled): the unnormalised probability
};

struct SelectionScratch {
  std::vector<Candidate> kept;      // the result
  std::vector<Candidate> all;       // every token with non-zero weight (top-p without top-k)
  std::vector<Candidate> boundary;  // sorted tokens among which the top-p cut falls
  std::vector<double> bucket_mass;  // top-p without top-k
  std::vector<float> block_max;     // max of each 64-token block
  std::vector<float> heap;          // top-k selection

  // Capacity for any row of up to `vocab` tokens, so that selection never allocates afterwards.
  void reserve(std::size_t vocab);
};

// The tokens that can be drawn, with their weights (probability = weight / sum of weights), in
// a deterministic order (the draw walks them in it). The span points into `scratch` and lives
// until its next use. A row without a finite maximum (all -inf, or a +inf) yields its first
// maximum alone.
std::span<const Candidate> select_candidates(std::span<const float> row, const RandomFilter& filter,
                                             SelectionScratch& scratch);

// Inverse-CDF draw over the candidates with uniform u in [0, 1).
int32_t draw_candidate(std::span<const Candidate> candidates, double u);

}  // namespace fp4serve::kernels::cpu
