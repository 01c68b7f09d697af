// Stop strings as vLLM's detokenizer checks them (vllm/v1/engine/detokenizer.py, StopChecker.
// check_stop_strings): after each new piece of text, look for every stop string in the part of the
// output that could contain a new match (so a stop string split across tokens is found), in the
// order the request lists them; the first one found ends the sequence and the text is cut before it
// (or after it with include_stop_str_in_output). While streaming, the last (longest stop - 1)
// characters are held back so a partial stop string is never sent.
//
// Text is UTF-8 bytes here where vLLM counts Python characters; searching bytes finds the same
// matches (UTF-8 is self-synchronising) and hold-back is counted in code points as vLLM does.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fp4serve::engine {

struct StopStringMatch {
  std::string stop;       // the stop string found (vLLM's stop_reason)
  std::size_t truncate_to;  // new length of the output text (bytes)
};

// output_text already contains the new text; new_bytes is how many bytes of it are new.
std::optional<StopStringMatch> find_stop_string(std::string_view output_text, std::size_t new_bytes,
                                                const std::vector<std::string>& stops,
                                                bool include_stop_str_in_output);

// Code points to hold back while streaming: max stop length - 1, or 0 when the stop strings are
// included in the output or there are none.
std::size_t stop_holdback_chars(const std::vector<std::string>& stops, bool include_stop_str_in_output);

// Byte length of text minus its last `chars` code points (0 if it has fewer).
std::size_t without_last_chars(std::string_view text, std::size_t chars);

}  // namespace fp4serve::engine
