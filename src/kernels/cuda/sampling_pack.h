// The host half of CUDA sampling: every row's options, edits and masks packed into flat arrays the
// kernel reads (one upload each), the uniforms drawn exactly as the CPU op draws them, and the
// kernel's results unpacked into the caller's SampleResults. Compiled by g++ (no CUDA types here),
// unit-tested on the CPU (tests/unit/kernels/cuda_sampling_pack_test.cpp).
//
// The processors become per-token edits: each edited token of a row appears once, with what the
// CPU op does to it in its order (sampling_processors.h): masked by allowed_token_ids or the grammar
// -> -inf from bad_words or min_tokens -> + each logit_bias entry -> penalties -> forced by the
// thinking budget. The kernel writes the edited values into the row, selects, then puts the raw
// values back before the logprobs (the caller's logits come back unchanged). O(V) masks (grammar,
// allowed_token_ids) are not edits: they travel as bitmasks the kernel applies as it reads.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/cuda/sampling_rules.h"
#include "kernels/sampling.h"

namespace fp4serve::kernels::cuda {

// Top-N logprobs up to this many are ranked on the device; more (logprobs -1: the whole valid
// vocabulary) are computed on the host from the row, downloaded (rare: a few requests ask).
inline constexpr int kMaxDeviceTop = 1024;

enum SampleMode : int32_t { kSampleGreedy = 0, kSampleRandom = 1 };
enum LogprobMode : int32_t { kLogprobsNone = 0, kLogprobsTop = 1, kLogprobsIds = 2, kLogprobsHost = 3 };

enum EditFlag : uint32_t {
  kEditBaseMasked = 1u,  // the grammar or allowed_token_ids mask sets it to -inf first
  kEditNegInf = 2u,      // bad_words or min_tokens
  kEditPenalize = 4u,    // in the prompt or the output, with penalties on
  kEditForce = 8u,       // the thinking budget's forced token
};

// One row as the kernel sees it (trivially copyable, uploaded as an array).
struct SampleRowParams {
  int64_t logits_offset = 0;  // floats from the view's base to the row
  double top_p = 1.0;         // < 1: on
  double uniform = 0.0;       // the row's Philox uniform (random rows)
  float temperature = 1.0f;
  float min_p = 0.0f;      // float32, as vLLM holds it; > 0: on
  float log_min_p = 0.0f;  // logf(min_p), computed here as the CPU's filter computes it
  float repetition = 1.0f, frequency = 0.0f, presence = 0.0f;
  int32_t mode = kSampleGreedy;
  int32_t top_k = 0;  // resolved: > 0 only when 0 < top_k < valid vocabulary
  int32_t edit_begin = 0, edit_count = 0;
  int32_t sample_mask = -1;   // word offset of the mask the selection reads through (-1: none)
  int32_t logprob_mask = -1;  // word offset of the grammar mask the logprobs read through (-1: none)
  int32_t logprobs = kLogprobsNone;
  int32_t num_top = 0;    // top-N ranked on the device, or the count of logprob ids
  int32_t ids_begin = 0;  // into the logprob ids
  int32_t out_top = 0;    // first entry of the row's top-N / ids logprobs in the results
};

struct SampleEdit {
  int32_t id = 0;
  uint32_t flags = 0;
  uint32_t count = 0;  // occurrences in the output (frequency, presence)
  int32_t bias_begin = 0, bias_count = 0;
};

// What the kernel writes per row, then per top entry; one download.
struct SampleRowResult {
  int32_t token = -1;
  float logprob = 0.0f;
  int64_t rank = 0;
};
struct SampleTopEntry {
  int32_t token = -1;
  float logprob = 0.0f;
};

// The value an edit leaves in the row (the kernel writes it; the unit tests check it against the
// CPU processors), from the token's raw logit, in the CPU op's order and float32 operations.
inline constexpr float kForcedLogitValue = 1e9f;  // cpu::kForcedLogit
FP4_SAMPLING_HD float edited_logit(float raw, const SampleEdit& e, const float* biases, const SampleRowParams& q) {
  float x = (e.flags & kEditBaseMasked) ? -INFINITY : raw;
  if (e.flags & kEditNegInf) x = -INFINITY;
  for (int32_t b = 0; b < e.bias_count; ++b) x = x + biases[e.bias_begin + b];
  if (e.flags & kEditPenalize) {
    if (q.repetition != 1.0f) x = x > 0.0f ? x / q.repetition : x * q.repetition;
    if (e.count > 0) {
      x -= q.frequency * static_cast<float>(e.count);
      x -= q.presence;
    }
  }
  if (e.flags & kEditForce) x = kForcedLogitValue;
  return x;
}

struct PackedSampling {
  std::vector<SampleRowParams> rows;
  std::vector<SampleEdit> edits;
  std::vector<float> biases;
  std::vector<uint32_t> masks;       // bitmask words, several rows' back to back
  std::vector<int32_t> logprob_ids;  // logprob_token_ids of every row
  int32_t top_entries = 0;           // SampleTopEntry slots the results need
  int32_t mask_words = 0;            // words per mask: ceil(valid / 32)
  int valid = 0;
  double fixed_scale = 0.0;  // 2^sampling_rules::fixed_mass_shift(valid)
};

// Packs a checked call (cpu::check_sample_call) whose row r starts `row_stride` floats after row
// r - 1. Draws the uniforms as the CPU op does: unseeded random rows advance *config.engine_draws in
// row order. Reuses `packed`'s storage.
void pack_sampling(std::span<const SampleRow> rows, const SamplingConfig& config, int64_t row_stride,
                   PackedSampling& packed);

// The results of the download into `out` (and each row's `top`). Rows with kLogprobsHost are left
// for the caller (their token is set; their logprobs come from the host row).
void unpack_sampling(const PackedSampling& packed, std::span<const SampleRow> rows,
                     std::span<const SampleRowResult> results, std::span<const SampleTopEntry> tops,
                     std::span<SampleResult> out);

// The logprobs of the kLogprobsHost rows from their downloaded raw rows (host_rows[r]: the valid
// vocabulary of row r, as the kernels left it: unedited), as the CPU op computes them: the grammar
// mask applied here, then host_token_logprobs. Keeps out[r].token.
void finish_host_logprobs(const PackedSampling& packed, std::span<const SampleRow> rows,
                          std::span<std::vector<float>> host_rows, const SamplingConfig& config,
                          std::span<SampleResult> out);

}  // namespace fp4serve::kernels::cuda
