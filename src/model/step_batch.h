// Where a sequence's state lives for one step, as plain pointers: the model does not care whether it
// is a test's contiguous SequenceState or the engine's pools (paged KV blocks, a GDN state slot).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "kernels/attention.h"
#include "kernels/gdn.h"
#include "model/mrope_positions.h"

namespace fp4serve::model {

using kernels::GdnStateRef;

// "After the first after_tokens new tokens of this sequence, copy every GDN layer's state to dst"
// (prefix-cache snapshots). The recurrent form splits at any token bit-identically, so the point
// can fall anywhere inside the chunk.
struct StateCopyPoint {
  int64_t after_tokens = 0;               // 1 .. number of new tokens
  std::span<const GdnStateRef> dst;       // per GDN layer
};

// "The input embeddings of new tokens first .. first + count - 1 are these rows" (an image's
// features in place of its <|image_pad|> embeddings; HF masked_scatter into the bf16 embeddings,
// so each value is rounded to bf16). values: [count, hidden] fp32 in host memory, alive for the step.
struct EmbeddingRows {
  int64_t first = 0;
  int64_t count = 0;
  const float* values = nullptr;
};

// Spans, not containers: the engine fills them from storage it reserved at start-up, so building a
// step allocates nothing.
struct BatchSequence {
  std::span<const int32_t> tokens;        // new tokens, at positions pos0 ...
  int64_t pos0 = 0;
  std::span<const GdnStateRef> gdn;       // per GDN layer, in layer order
  // (Sequences sharing a GDN state -- the step-graph padding's scratch slot -- run their GDN rows
  // only in the first of them; the others' GDN output rows are unspecified.)
  std::span<const kernels::KvView> kv;    // per attention layer; must cover pos0 + tokens.size() rows
  std::span<const StateCopyPoint> copies; // ascending after_tokens
  // Logit rows: none (a prefill chunk short of the prompt's end), the last token, every token, or
  // the last last_rows tokens (speculative verification: the last real token and its drafts). Every
  // row is bit-identical to the same position's row under kAll.
  enum class Logits : uint8_t { kNone, kLast, kAll, kLastN } logits = Logits::kLast;
  int64_t last_rows = 0;                  // kLastN only; clamped to the new tokens
  // The logits rows of the first sink_rows new tokens go to the step's LogitsRowSink (prompt
  // logprobs), whatever `logits` says; they are not in the returned rows.
  int64_t sink_rows = 0;
  // Multimodal sequences: rows whose embedding is given (ascending, within the new tokens), and the
  // sequence's images (placed, mrope_positions.h) that make its positions three-axis: token i of the
  // sequence at mrope_positions(...) instead of i on every axis. Empty for text: positions pos0 + i.
  std::span<const EmbeddingRows> embeds;
  std::span<const MropeImage> mrope;
};

// Receives sink rows a block at a time, so a long prefill chunk never holds [tokens, vocab] floats
// at once: `rows` is [count, vocab], rows of sequence `seq` (index in the step) for its new tokens
// first .. first + count - 1. Called on the stepping thread, in sequence and token order.
using LogitsRowSink = std::function<void(std::size_t seq, int64_t first, int64_t count, const float* rows)>;

}  // namespace fp4serve::model
