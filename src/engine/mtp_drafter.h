// The MTP drafter: speculative decoding's proposals from the checkpoint's own multi-token-prediction
// layer (docs/model-arch.md §2.5; vLLM's EagleProposer in method "mtp", v1/spec_decode/eagle.py).
//
// After each step, for every running request the step ran, the MTP runs over the rows the step kept
// (a prefill chunk's tokens, a decode's token, a verify step's last token and accepted drafts): the
// row at position p pairs the target's final-norm hidden state at p with the token at p + 1, writes
// the MTP layer's KV at p and, for the request's last position L - 2 (L tokens known), predicts the
// token at L: draft 1 (argmax, as vLLM's proposer). Drafts 2 .. N chain: the previous row's MTP
// hidden state and its draft at the next position, one row per request per pass.
//
// KV: the MTP layer is one more layer of the runner's paged KV cache (same blocks, same dtype), so
// a request's block table covers its MTP entries too and prefix hits, forks (copy_block copies every
// layer) and preemption need nothing of their own. A chained row sits past the request's computed
// tokens: inside the request's own last partial block (never shared: only full blocks are) or in a
// scratch block of the drafter's (ids past the engine's block pool). Its entries are overwritten
// once the target has checked the drafts, before anything attends to them again.
//
// Drafts are greedy (argmax), as vLLM's MTP proposer's. Verification samples each row as the plain
// decode would and keeps drafts while they match (step_sampling.h): for a sampled request a draft d
// is then kept with probability p_target(d), exactly what vLLM's rejection sampler gives a greedy
// draft (accept with min(1, p(d) / q(d)), q(d) = 1), so acceptance is the same, and a seeded request
// keeps the tokens of a run without drafts.
//
// Drafts never change the output (step_sampling.h verifies them); only their quality depends on
// this: an MTP entry is stale when the block holding it was written by another request whose next
// token differed (the last position of a shared prefix), or missing when a request finished in the
// step that computed it. Neither breaks anything; both cost acceptance, as in vLLM.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/drafter.h"
#include "engine/model_runner.h"

namespace fp4serve::engine {

struct MtpDrafterConfig {
  int num_speculative_tokens = 1;
  int max_num_batched_tokens = 2048;  // rows of one MTP pass (a step's kept rows)
  int max_num_seqs = 256;
  int max_model_len = 0;              // no draft past it (0: no limit of its own)
  int first_scratch_block = 0;        // the runner's KV blocks past the engine's pool
  int scratch_blocks_per_seq = 0;
};

class MtpDrafter final : public Drafter {
 public:
  // Scratch blocks a request's chained drafts may need beyond its own blocks.
  static int scratch_blocks_per_seq(int num_speculative_tokens, int block_size);

  // The model must have its MTP head bound (Qwen35MoeModel::bind_mtp) and the runner an MTP KV layer.
  MtpDrafter(const model::Qwen35MoeModel& model, ModelRunner& runner, const MtpDrafterConfig& config);

  // Unused: the MTP needs the step (propose_step); a request alone gets no drafts.
  void propose(const DraftRequest&, int, std::vector<std::int32_t>&) override {}
  void propose_step(const SchedulerOutput& step, int max_tokens, std::int64_t vocab_size,
                    std::span<Request* const> running) override;

 private:
  struct Item {
    Request* request = nullptr;
    int row0 = 0;        // first row of the request in the target's step
    int pos0 = 0;        // position of its first kept row
    int rows = 0;        // kept rows
    int budget = 0;      // drafts it may still take (0: not in decode)
  };
  // The MTP layer's KV view of `it` for positions up to last_pos (block table in table_store_).
  kernels::KvView kv_view(const Item& it, int item_index, int last_pos);
  // Argmax of each logits row (greedy drafts, as vLLM's proposer) appended to its request's drafts.
  void take_drafts(const kernels::TensorView& logits, std::span<const int> items, std::int64_t vocab_size);

  const model::Qwen35MoeModel* model_;
  ModelRunner* runner_;
  MtpDrafterConfig config_;
  int mtp_layer_ = 0;
  kernels::DeviceBuffer buffer_;
  kernels::TensorView hidden_in_, cat_, hidden_out_;
  // Host staging, reserved at construction.
  std::vector<Item> items_;
  std::vector<int> with_logits_;              // items that draft this pass
  std::vector<std::int64_t> target_rows_;
  std::vector<model::BatchSequence> batch_;
  std::vector<kernels::KvView> views_;
  std::vector<std::int32_t> chain_tokens_;
  std::vector<std::int32_t> table_store_;     // block tables with scratch blocks appended
  std::vector<float> host_row_;
};

}  // namespace fp4serve::engine
