// bad_words matching, as vLLM applies it [vllm: v1/sample/ops/bad_words.py]: a bad word is a token
// sequence (the engine tokenizes the request's words, engine/bad_words.h); the next draw may not
// take its LAST token when the generated tokens so far end with the rest of it. Only the generated
// tokens are matched, never the prompt; a one-token word is banned at every step.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace fp4serve::kernels::cpu {

// Calls fn(token) for the last token of every sequence whose other tokens are the tail of
// `output_ids`, in the sequences' order (a token may come more than once). Allocates nothing.
template <class Fn>
void for_each_banned_next_token(std::span<const std::vector<int32_t>> bad_words,
                                std::span<const int32_t> output_ids, Fn&& fn) {
  for (const auto& seq : bad_words) {
    if (seq.empty() || seq.size() > output_ids.size() + 1) continue;
    const auto prefix = static_cast<std::ptrdiff_t>(seq.size() - 1);
    if (std::equal(seq.begin(), seq.begin() + prefix, output_ids.end() - prefix)) fn(seq.back());
  }
}

// The same tokens as a list.
std::vector<int32_t> banned_next_tokens(std::span<const std::vector<int32_t>> bad_words,
                                        std::span<const int32_t> output_ids);

}  // namespace fp4serve::kernels::cpu
