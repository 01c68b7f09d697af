#include "kernels/cpu/sampling_bad_words.h"

namespace fp4serve::kernels::cpu {

std::vector<int32_t> banned_next_tokens(std::span<const std::vector<int32_t>> bad_words,
                                        std::span<const int32_t> output_ids) {
  std::vector<int32_t> banned;
  for_each_banned_next_token(bad_words, output_ids, [&](int32_t token) { banned.push_back(token); });
  return banned;
}

}  // namespace fp4serve::kernels::cpu
