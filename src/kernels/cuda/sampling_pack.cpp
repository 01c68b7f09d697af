#include "kernels/cuda/sampling_pack.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/cpu/sampling_bad_words.h"
#include "kernels/cpu/sampling_processors.h"
#include "kernels/cpu/sampling_rng.h"
#include "kernels/cuda/sampling_rules.h"
#include "kernels/reasoning_budget.h"

namespace fp4serve::kernels::cuda {

static_assert(kForcedLogitValue == cpu::kForcedLogit);

namespace {

// One edited token of the row being packed, before its biases are flattened.
struct PendingEdit {
  SampleEdit edit;
  std::vector<float> biases;
};

// Per-row scratch kept across calls (the host thread that runs the op).
struct PackScratch {
  std::vector<int32_t> edit_of;      // token -> index into `pending`, -1 when unedited
  std::vector<PendingEdit> pending;  // grows, entries reused
  std::size_t used = 0;
  std::vector<uint32_t> counts;  // token -> bit 31 in prompt, bits 0..30 output count
  std::vector<int32_t> touched;

  void reserve(std::size_t valid) {
    if (edit_of.size() < valid) edit_of.assign(valid, -1);
    if (counts.size() < valid) counts.assign(valid, 0u);
  }
  PendingEdit& edit(int32_t token) {
    int32_t& slot = edit_of[static_cast<std::size_t>(token)];
    if (slot < 0) {
      if (used == pending.size()) pending.emplace_back();
      PendingEdit& e = pending[used];
      e.edit = SampleEdit{};
      e.edit.id = token;
      e.biases.clear();
      slot = static_cast<int32_t>(used++);
    }
    return pending[static_cast<std::size_t>(slot)];
  }
  void clear_row() {
    for (std::size_t i = 0; i < used; ++i) edit_of[static_cast<std::size_t>(pending[i].edit.id)] = -1;
    used = 0;
  }
};

constexpr uint32_t kInPrompt = 0x80000000u;
constexpr uint32_t kCountMask = 0x7fffffffu;

bool grammar_allows(std::span<const int32_t> bitmask, int64_t id) {
  return bitmask.empty() || ((static_cast<uint32_t>(bitmask[static_cast<std::size_t>(id >> 5)]) >> (id & 31)) & 1u);
}

bool allowed(const SamplingOptions& o, int64_t id) {
  return o.allowed_token_ids.empty() ||
         std::binary_search(o.allowed_token_ids.begin(), o.allowed_token_ids.end(), static_cast<int32_t>(id));
}

// The row's processors as edits, in the CPU op's order (cpu/sampling_processors.cpp); ids outside
// [0, valid) are ignored there and here.
void collect_edits(const SampleRow& row, int64_t valid, PackScratch& s) {
  const SamplingOptions& o = *row.options;
  auto in_row = [valid](int64_t id) { return id >= 0 && id < valid; };
  cpu::for_each_banned_next_token(o.bad_words, row.output_ids, [&](int32_t id) {
    if (in_row(id)) s.edit(id).edit.flags |= kEditNegInf;
  });
  if (o.min_tokens > 0 && static_cast<int64_t>(row.output_ids.size()) < o.min_tokens) {
    for (int64_t id : o.min_tokens_stop_ids)
      if (in_row(id)) s.edit(static_cast<int32_t>(id)).edit.flags |= kEditNegInf;
  }
  for (const auto& [id, bias] : o.logit_bias)
    if (in_row(id)) s.edit(id).biases.push_back(bias);
  if (o.has_penalties()) {
    s.touched.clear();
    auto touch = [&](int32_t id) -> uint32_t& {
      uint32_t& c = s.counts[static_cast<std::size_t>(id)];
      if (c == 0) s.touched.push_back(id);
      return c;
    };
    for (int32_t id : row.prompt_ids)
      if (in_row(id)) touch(id) |= kInPrompt;
    for (int32_t id : row.output_ids) {
      if (!in_row(id)) continue;
      uint32_t& c = touch(id);
      c = (c & kInPrompt) | ((c & kCountMask) + 1);
    }
    for (int32_t id : s.touched) {
      uint32_t& c = s.counts[static_cast<std::size_t>(id)];
      SampleEdit& e = s.edit(id).edit;
      e.flags |= kEditPenalize;
      e.count = c & kCountMask;
      c = 0;
    }
  }
  if (o.reasoning_budget.active()) {
    if (const auto forced = forced_reasoning_token(o.reasoning_budget, row.output_ids); forced && in_row(*forced))
      s.edit(*forced).edit.flags |= kEditForce;
  }
  for (std::size_t i = 0; i < s.used; ++i) {
    SampleEdit& e = s.pending[i].edit;
    if (!grammar_allows(row.token_bitmask, e.id) || !allowed(o, e.id)) e.flags |= kEditBaseMasked;
  }
}

// Appends the mask the selection reads the row through: the grammar's words AND allowed_token_ids,
// with every edited token's bit set (its edited value already holds the mask's -inf, or the
// thinking budget's forced logit that overrides it). Returns its word offset.
int32_t append_sample_mask(const SampleRow& row, const PackScratch& s, PackedSampling& p) {
  const SamplingOptions& o = *row.options;
  const auto words = static_cast<std::size_t>(p.mask_words);
  const std::size_t at = p.masks.size();
  p.masks.resize(at + words, ~0u);
  uint32_t* m = p.masks.data() + at;
  if (!row.token_bitmask.empty())
    for (std::size_t w = 0; w < words; ++w) m[w] = static_cast<uint32_t>(row.token_bitmask[w]);
  if (!o.allowed_token_ids.empty()) {
    std::vector<uint32_t> allow(words, 0u);
    for (int32_t id : o.allowed_token_ids)
      if (id >= 0 && id < p.valid) allow[static_cast<std::size_t>(id) >> 5] |= 1u << (id & 31);
    for (std::size_t w = 0; w < words; ++w) m[w] &= allow[w];
  }
  for (std::size_t i = 0; i < s.used; ++i) {
    const int32_t id = s.pending[i].edit.id;
    m[static_cast<std::size_t>(id) >> 5] |= 1u << (id & 31);
  }
  return static_cast<int32_t>(at);
}

int32_t append_grammar_mask(const SampleRow& row, PackedSampling& p) {
  const std::size_t at = p.masks.size();
  for (std::size_t w = 0; w < static_cast<std::size_t>(p.mask_words); ++w)
    p.masks.push_back(static_cast<uint32_t>(row.token_bitmask[w]));
  return static_cast<int32_t>(at);
}

PackScratch& pack_scratch(std::size_t valid) {
  thread_local PackScratch s;
  s.reserve(valid);
  return s;
}

}  // namespace

void pack_sampling(std::span<const SampleRow> rows, const SamplingConfig& config, int64_t row_stride,
                   PackedSampling& p) {
  if (config.valid_vocab_size > (int64_t{1} << 30))
    throw std::invalid_argument("sample: valid vocabulary of " + std::to_string(config.valid_vocab_size) +
                                " tokens is beyond the CUDA kernel's 2^30");
  p.rows.clear();
  p.edits.clear();
  p.biases.clear();
  p.masks.clear();
  p.logprob_ids.clear();
  p.top_entries = 0;
  p.valid = static_cast<int>(config.valid_vocab_size);
  p.mask_words = (p.valid + 31) / 32;
  p.fixed_scale = std::ldexp(1.0, sampling_rules::fixed_mass_shift(config.valid_vocab_size));
  PackScratch& s = pack_scratch(static_cast<std::size_t>(p.valid));

  for (std::size_t r = 0; r < rows.size(); ++r) {
    const SampleRow& row = rows[r];
    const SamplingOptions& o = *row.options;
    SampleRowParams q;
    q.logits_offset = static_cast<int64_t>(r) * row_stride;
    // The uniforms exactly as the CPU op (cpu/sampling_cpu.cpp): seeded rows from (seed, position),
    // unseeded random rows from the engine generator, in row order.
    if (!o.greedy()) {
      q.mode = kSampleRandom;
      q.uniform = o.seed ? cpu::philox_uniform(*o.seed, cpu::RngStream::kSeededRequest, row.output_ids.size())
                         : cpu::philox_uniform(config.seed, cpu::RngStream::kEngine, (*config.engine_draws)++);
      q.temperature = static_cast<float>(o.temperature);
      q.top_p = o.top_p;
      q.top_k = o.top_k > 0 && o.top_k < config.valid_vocab_size ? static_cast<int32_t>(o.top_k) : 0;
      if (o.min_p > 0.0) {
        q.min_p = static_cast<float>(o.min_p);
        q.log_min_p = std::log(q.min_p);
      }
    }
    q.repetition = static_cast<float>(o.repetition_penalty);
    q.frequency = static_cast<float>(o.frequency_penalty);
    q.presence = static_cast<float>(o.presence_penalty);

    collect_edits(row, config.valid_vocab_size, s);
    q.edit_begin = static_cast<int32_t>(p.edits.size());
    q.edit_count = static_cast<int32_t>(s.used);
    for (std::size_t i = 0; i < s.used; ++i) {
      SampleEdit e = s.pending[i].edit;
      e.bias_begin = static_cast<int32_t>(p.biases.size());
      e.bias_count = static_cast<int32_t>(s.pending[i].biases.size());
      p.biases.insert(p.biases.end(), s.pending[i].biases.begin(), s.pending[i].biases.end());
      p.edits.push_back(e);
    }
    if (!row.token_bitmask.empty() || !o.allowed_token_ids.empty()) q.sample_mask = append_sample_mask(row, s, p);
    if (!row.token_bitmask.empty()) q.logprob_mask = append_grammar_mask(row, p);
    s.clear_row();

    if (!o.logprob_token_ids.empty()) {
      q.logprobs = kLogprobsIds;
      q.num_top = static_cast<int32_t>(o.logprob_token_ids.size());
      q.ids_begin = static_cast<int32_t>(p.logprob_ids.size());
      p.logprob_ids.insert(p.logprob_ids.end(), o.logprob_token_ids.begin(), o.logprob_token_ids.end());
    } else if (o.logprobs) {
      const int64_t n = o.top_entries(config.valid_vocab_size);
      q.logprobs = n <= kMaxDeviceTop ? kLogprobsTop : kLogprobsHost;
      q.num_top = q.logprobs == kLogprobsTop ? static_cast<int32_t>(n) : 0;
    }
    q.out_top = p.top_entries;
    p.top_entries += q.num_top;
    p.rows.push_back(q);
  }
}

void unpack_sampling(const PackedSampling& p, std::span<const SampleRow> rows, std::span<const SampleRowResult> results,
                     std::span<const SampleTopEntry> tops, std::span<SampleResult> out) {
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const SampleRowParams& q = p.rows[r];
    const SampleRowResult& res = results[r];
    SampleResult x;
    x.token = res.token;
    if (q.logprobs == kLogprobsTop || q.logprobs == kLogprobsIds) {
      x.has_logprobs = true;
      x.logprob = res.logprob;
      x.rank = res.rank;
      x.num_top = q.num_top;
      for (int32_t i = 0; i < q.num_top; ++i) {
        const SampleTopEntry& e = tops[static_cast<std::size_t>(q.out_top + i)];
        rows[r].top[static_cast<std::size_t>(i)] = TokenLogprob{e.token, e.logprob};
      }
    }
    out[r] = x;
  }
}

void finish_host_logprobs(const PackedSampling& p, std::span<const SampleRow> rows,
                          std::span<std::vector<float>> host_rows, const SamplingConfig& config,
                          std::span<SampleResult> out) {
  for (std::size_t r = 0; r < rows.size(); ++r) {
    if (p.rows[r].logprobs != kLogprobsHost) continue;
    std::vector<float>& host = host_rows[r];
    if (!rows[r].token_bitmask.empty()) cpu::apply_token_bitmask(host, rows[r].token_bitmask);
    const int32_t token = out[r].token;
    out[r] = host_token_logprobs(host, token, rows[r].options->top_entries(config.valid_vocab_size), rows[r].top);
    out[r].token = token;
  }
}

}  // namespace fp4serve::kernels::cuda
