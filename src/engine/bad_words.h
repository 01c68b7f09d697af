// bad_words, as vLLM supports it: each word becomes one or two token sequences, and the sampler
// forbids the LAST token of a sequence whenever the generated tokens so far end with the rest of it
// [vllm: sampling_params.py update_from_tokenizer, v1/sample/ops/bad_words.py]. This file makes the
// sequences; the backend's sampling op matches them (kernels/cpu/sampling_bad_words.h on the CPU).
//
// Tokenization: the word with its leading whitespace stripped, encoded without special tokens; then
// " " + that, kept only when it is a different first token of the same length (the word at the
// start of the text and the word after a space, for tokenizers that fold the space into the token).
#pragma once

#include <cstdint>
#include <optional>

#include "engine/sampling_params.h"
#include "tokenizer/tokenizer.h"

namespace fp4serve::engine {

// Fills params.bad_words_token_ids from params.bad_words (already deduplicated by
// prepare_sampling_params). Returns vLLM's error, word for word, for a word that encodes to no
// token or more than max_num_bad_words sequences (VLLM_MAX_NUM_BAD_WORDS).
std::optional<SamplingParamsError> tokenize_bad_words(SamplingParams& params,
                                                      const tokenizer::Tokenizer& tokenizer,
                                                      int64_t max_num_bad_words = kMaxNumBadWords);

}  // namespace fp4serve::engine
