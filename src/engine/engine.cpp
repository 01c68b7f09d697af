#include "engine/engine.h"

#include <algorithm>
#include <deque>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "engine/drafter.h"
#include "engine/mtp_drafter.h"
#include "engine/engine_error.h"
#include "engine/image_features.h"
#include "engine/kv_cache_manager.h"
#include "engine/multimodal_prompt.h"
#include "engine/model_runner.h"
#include "engine/prompt_twins.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/state_pool.h"
#include "engine/state_snapshot_store.h"
#include "engine/kv_event_publisher.h"
#include "engine/step_sampling.h"
#include "engine/stop_strings.h"
#include "engine/structured/grammar_compiler.h"
#include "engine/structured/structured_output_state.h"
#include "engine/structured/structured_rows.h"
#include "kernels/reasoning_budget.h"
#include "model/paged_kv_cache.h"
#include "model/state_arena.h"

namespace fp4serve::engine {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

struct ParentTrack;

// One generated sequence (a child of an n > 1 request, or the request itself).
struct SequenceTrack {
  ParentTrack* parent = nullptr;
  int index = 0;
  std::string scheduler_id;
  SamplingParams params;
  kernels::SamplingOptions sampling;  // params in the sampling op's form, made at admission
  std::unique_ptr<tokenizer::IncrementalDetokenizer> detok;
  std::string text;
  std::size_t sent_bytes = 0;
  std::size_t holdback_chars = 0;
  int num_output = 0;
  bool finished = false;
  std::string finish_reason;
  StopReason stop_reason;
  StopReason token_stop_reason;  // set by the stop checker when a stop token ends the sequence
  Clock::time_point last_token_time{};
  // prompt_logprobs: filled from the prefill's rows, handed out with the first token.
  std::optional<PromptLogprobs> prompt_logprobs;
  // Structured output: the grammar's progress over this sequence (null: unconstrained).
  std::unique_ptr<StructuredOutputState> structured;
  // The features of the prompt's images while its prefill runs them (requests with images only).
  ImageFeatures images;
};

// A request whose structured-output grammar is compiling (vLLM's WAITING_FOR_FSM): admitted to the
// scheduler once the compile finishes, so a new schema never holds up the running batch.
struct GrammarWait {
  EngineRequest request;
  std::shared_ptr<OutputChannel> channel;
  CompileFuture grammar;
};

struct ParentTrack {
  std::string id;
  std::shared_ptr<OutputChannel> channel;
  std::vector<std::unique_ptr<SequenceTrack>> seqs;
  int unfinished = 0;
  int num_prompt_tokens = 0;
  int num_cached_tokens = -1;
  Clock::time_point arrival{};
  Clock::time_point first_scheduled{}, first_token{}, last_token{};
  int n = 1;
  int max_tokens = 0;
  bool scheduled_once = false;
  bool first_token_seen = false;
  std::string last_finish_reason;
  RequestOutput pending;  // deltas gathered during the current step
  // Set when this request computes its prompt itself and is registered in the twin index.
  std::optional<std::uint64_t> twin_key;
  std::string twin_id;
};

const char* kv_dtype_name(kernels::KvDtype d) { return d == kernels::KvDtype::kBf16 ? "bf16" : "fp8_e4m3"; }

}  // namespace

struct Engine::Impl {
  Impl(std::shared_ptr<const model::Qwen35MoeModel> m, std::shared_ptr<const tokenizer::Tokenizer> t,
       const EngineConfig& c, const CachePlan& plan, const EngineInfo& info)
      : model(std::move(m)),
        tok(std::move(t)),
        config(c),
        info(info),
        snapshots(plan.num_snapshots),
        kv(KvCacheConfig{c.block_size, plan.num_kv_blocks, info.max_model_len, c.enable_prefix_caching},
           c.enable_prefix_caching && plan.num_snapshots >= 0 && model->config().num_linear_attention_layers() > 0
               ? &snapshots
               : nullptr),
        slots(plan.num_state_slots),
        scheduler(SchedulerConfig{c.max_num_batched_tokens, plan.max_num_seqs, info.max_model_len,
                                  c.long_prefill_token_threshold, c.enable_prefix_caching ? c.snapshot_interval : 0,
                                  c.num_speculative_tokens},
                  kv, slots,
                  c.enable_prefix_caching && model->config().num_linear_attention_layers() > 0 ? &snapshots : nullptr,
                  [this](const Request& r) { return stop_token_check(r); }),
        sampler(make_sampler_config(), model->backend()),
        runner(*model, ModelRunnerConfig{plan.num_kv_blocks, c.block_size, c.kv_dtype, plan.num_state_slots,
                                         plan.num_snapshots, c.max_num_batched_tokens, plan.max_num_seqs,
                                         info.max_model_len, c.num_speculative_tokens, c.mtp,
                                         c.mtp ? plan.max_num_seqs * MtpDrafter::scratch_blocks_per_seq(
                                                                         c.num_speculative_tokens, c.block_size)
                                               : 0,
                                         info.cuda_graph_sizes}),
        drafter(c.drafter),
        num_speculative_tokens(c.num_speculative_tokens) {
    if (c.mtp) {
      drafter = std::make_shared<MtpDrafter>(
          *model, runner,
          MtpDrafterConfig{c.num_speculative_tokens, c.max_num_batched_tokens, plan.max_num_seqs, info.max_model_len,
                           plan.num_kv_blocks,
                           MtpDrafter::scratch_blocks_per_seq(c.num_speculative_tokens, c.block_size)});
    }
    stats.request_prompt_tokens = Histogram(one_two_five_buckets(info.max_model_len));
    stats.request_generation_tokens = Histogram(one_two_five_buckets(info.max_model_len));
    stats.request_max_num_generation_tokens = Histogram(one_two_five_buckets(info.max_model_len));
    stats.request_params_max_tokens = Histogram(one_two_five_buckets(info.max_model_len));
    stats.last_progress = Clock::now();
    if (c.kv_events.publishes()) start_kv_events(c.kv_events);
  }

  // KV events: the cache's emit points record into kv_event_log; after each step the events become
  // one batch for the publisher thread. The first batch says the cache is empty, so a router that
  // indexed an earlier engine on this endpoint (a restart) forgets it.
  void start_kv_events(const KvEventsConfig& ec) {
    kv_publisher = std::make_unique<KvEventPublisher>(ec);
    kv.set_event_recorder(&kv_event_log);
    snapshots.set_event_recorder(&kv_event_log);
    spdlog::info("KV events: publishing on {} (topic '{}'){}{}", kv_publisher->pub_address(), ec.topic,
                 ec.replay_endpoint ? ", replay on " + kv_publisher->replay_address() : std::string(),
                 config.enable_prefix_caching ? "" : "; prefix caching is off, so no block will be reported");
    kv_event_log.all_blocks_cleared();
    flush_kv_events();
  }

  void flush_kv_events() {
    if (!kv_publisher || kv_event_log.empty()) return;
    KvEventBatch batch;
    batch.ts = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    batch.events = kv_event_log.take();
    kv_publisher->publish(std::move(batch));
  }

  SamplerConfig make_sampler_config() const {
    SamplerConfig sc;
    sc.vocab_size = info.vocab_size;
    sc.valid_vocab_size = info.valid_vocab_size;
    sc.eos_token_ids = config.generation_eos_token_ids;
    if (config.eos_token_id >= 0 &&
        std::find(sc.eos_token_ids.begin(), sc.eos_token_ids.end(), config.eos_token_id) == sc.eos_token_ids.end())
      sc.eos_token_ids.push_back(config.eos_token_id);
    sc.seed = config.seed;
    sc.max_rows = static_cast<std::int64_t>(info.max_num_seqs) * (1 + std::max(0, config.num_speculative_tokens));
    return sc;
  }

  static SequenceTrack* track_of(const Request& r) { return static_cast<SequenceTrack*>(r.user_data.get()); }

  // A request can be forked from while it has not produced a token, is not itself held, and its
  // prompt, cache salt and prompt-logprobs setting are this one's (the fork hands the source's
  // prompt logprobs over as they are).
  bool can_fork_from(const std::string& id, std::span<const std::int32_t> prompt, std::uint64_t cache_salt_hash,
                     const MultimodalPrompt* mm, const SamplingParams& params) const {
    const Request* r = scheduler.find(id);
    if (r == nullptr || r->finished() || r->fork_source != nullptr || r->num_output_tokens() != 0) return false;
    if (r->cache_salt_hash != cache_salt_hash) return false;
    // The same token ids with other images is another prompt.
    if ((r->mm ? r->mm->content_key : 0) != (mm ? mm->content_key : 0)) return false;
    const std::span<const std::int32_t> theirs = r->prompt_token_ids();
    if (!std::equal(theirs.begin(), theirs.end(), prompt.begin(), prompt.end())) return false;
    return track_of(*r)->params.prompt_logprobs == params.prompt_logprobs;
  }

  // vLLM check_stop after max_tokens/max_model_len: min_tokens, EOS, stop token ids.
  bool stop_token_check(const Request& r) {
    SequenceTrack* seq = track_of(r);
    const SamplingParams& p = seq->params;
    if (r.num_output_tokens() < p.min_tokens) return false;
    const std::int64_t token = r.output_token_ids().back();
    if (!p.ignore_eos && token == config.eos_token_id) {
      seq->token_stop_reason = std::monostate{};
      return true;
    }
    if (std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token) != p.stop_token_ids.end()) {
      seq->token_stop_reason = token;
      return true;
    }
    return false;
  }

  // ---- engine thread ----
  void run() {
    while (true) {
      std::deque<EngineRequest> incoming;
      std::vector<std::string> aborts;
      bool hard_stop = false;
      {
        std::unique_lock lock(inbox_mutex);
        const bool busy = scheduler.has_unfinished_requests() && !debug_stall.load();
        if (!busy) {
          wake.wait_for(lock, std::chrono::milliseconds(50),
                        [&] { return !inbox.empty() || !abort_inbox.empty() || stop_hard || grammar_ready; });
        }
        grammar_ready = false;
        incoming.swap(inbox);
        aborts.swap(abort_inbox);
        hard_stop = stop_hard;
      }
      for (EngineRequest& r : incoming) {
        std::shared_ptr<OutputChannel> channel;
        {
          std::lock_guard lock(inbox_mutex);
          channel = channels_pending.at(r.id);
          channels_pending.erase(r.id);
        }
        if (parents.count(r.id) || waiting_for_grammar(r.id)) {
          RequestOutput out;
          out.request_id = r.id;
          out.finished = true;
          out.error = fmt::format("request id {} is already running", r.id);
          channel->push(std::move(out));
          continue;
        }
        if (r.params.structured_outputs) {
          CompileFuture grammar = grammar_compiler().compile(*r.params.structured_outputs);
          grammar_waits.push_back(GrammarWait{std::move(r), std::move(channel), std::move(grammar)});
          continue;
        }
        admit(std::move(r), std::move(channel));
      }
      for (const std::string& id : aborts) {
        abort_grammar_wait(id, std::nullopt);
        abort_parent(id, std::nullopt);
      }
      const bool compiled = admit_compiled();
      if (!incoming.empty() || !aborts.empty() || compiled) publish(true);
      if (hard_stop) {
        std::vector<std::string> ids;
        for (const auto& [id, _] : parents) ids.push_back(id);
        for (const std::string& id : ids) abort_parent(id, std::string("server shutting down"), /*shutdown=*/true);
        while (!grammar_waits.empty())
          abort_grammar_wait(grammar_waits.front().request.id, std::string("server shutting down"), true);
        publish(false);
        return;
      }
      if (!scheduler.has_unfinished_requests() || debug_stall.load()) {
        publish(scheduler.has_unfinished_requests());
        if (debug_stall.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        continue;
      }
      try {
        step();
      } catch (const std::exception& e) {
        // A bug or an impossible input slipped through: fail every request loudly rather than hang.
        spdlog::error("engine step failed: {}; aborting all requests", e.what());
        std::vector<std::string> ids;
        for (const auto& [id, _] : parents) ids.push_back(id);
        for (const std::string& id : ids) abort_parent(id, fmt::format("engine error: {}", e.what()));
        publish(scheduler.has_unfinished_requests());
      }
      flush_kv_events();
    }
  }

  void admit(EngineRequest req, std::shared_ptr<OutputChannel> channel,
             std::shared_ptr<const xgrammar::CompiledGrammar> grammar = nullptr,
             std::shared_ptr<const std::vector<std::int32_t>> token_filter = nullptr) {
    auto parent = std::make_unique<ParentTrack>();
    parent->id = req.id;
    parent->channel = std::move(channel);
    parent->arrival = req.arrival_time;
    parent->num_prompt_tokens = static_cast<int>(req.prompt_token_ids.size());
    SamplingParams params = req.params;
    if (!params.ignore_eos) {
      for (std::int64_t id : config.generation_eos_token_ids) {
        if (id == config.eos_token_id) continue;
        if (std::find(params.stop_token_ids.begin(), params.stop_token_ids.end(), id) == params.stop_token_ids.end())
          params.stop_token_ids.push_back(id);
      }
    }
    const int n = static_cast<int>(std::max<std::int64_t>(1, params.n));
    // A resumed request (resumed_sequence.h): each sequence recomputes the prompt and its own tokens,
    // no forks and no twins.
    const bool resuming = !req.resumed.empty();
    // Checked by submit(): cannot throw here.
    const std::shared_ptr<const MultimodalPrompt> mm = make_multimodal_prompt(req.images, req.prompt_token_ids, image_rules);
    // One prefill for identical concurrent prompts (prompt_twins.h): every sequence of this request
    // forks from a request still computing the same prompt, when there is one.
    const std::uint64_t twin_key =
        PromptTwinIndex::key(req.prompt_token_ids, req.cache_salt_hash ^ (mm ? mm->content_key : 0));
    const std::string* twin = resuming ? nullptr : twins.find(twin_key, [&](const std::string& id) {
      return can_fork_from(id, req.prompt_token_ids, req.cache_salt_hash, mm.get(), params);
    });
    std::string source_id = twin ? *twin : std::string();
    const int room = info.max_model_len - parent->num_prompt_tokens;
    const int max_tokens = static_cast<int>(std::min<std::int64_t>(params.max_tokens.value_or(room), room));
    int unfinished = n;
    for (int i = 0; i < n; ++i) {
      const ResumedSequence* resumed = nullptr;
      for (const ResumedSequence& rs : req.resumed)
        if (rs.index == i) resumed = &rs;
      auto seq = std::make_unique<SequenceTrack>();
      seq->parent = parent.get();
      seq->index = i;
      seq->scheduler_id = n == 1 ? req.id : fmt::format("{}_{}", i, req.id);
      seq->params = n == 1 ? params : child_sampling_params(params, i);
      seq->sampling = sampler.options_for(seq->params, req.prompt_token_ids);
      seq->detok = std::make_unique<tokenizer::IncrementalDetokenizer>(*tok, req.detokenize, req.prompt_token_ids);
      seq->holdback_chars = stop_holdback_chars(params.stop, params.include_stop_str_in_output);
      if (grammar) seq->structured = make_structured_state(grammar, token_filter, params, req.prompt_token_ids);
      if (resumed && resumed->finished) {
        // Its final delta was sent before the engine died: nothing left to run.
        seq->finished = true;
        --unfinished;
        parent->seqs.push_back(std::move(seq));
        continue;
      }
      if (resumed && !resumed->token_ids.empty()) {
        resume_sequence(*seq, *resumed, req, mm, std::max(1, max_tokens));
        parent->seqs.push_back(std::move(seq));
        continue;
      }
      // Children 1 .. n-1 are held until child 0 has computed the prompt, then forked from it
      // (scheduler.h): one prefill for the n sequences (or none, when a twin computes it).
      const bool computes_prompt = source_id.empty();
      Request& r = computes_prompt ? scheduler.add_request(seq->scheduler_id, req.prompt_token_ids,
                                                           std::max(1, max_tokens), req.cache_salt_hash, mm)
                                   : scheduler.add_fork_child(seq->scheduler_id, source_id, std::max(1, max_tokens));
      if (computes_prompt && !resuming) {
        source_id = seq->scheduler_id;
        twins.add(twin_key, seq->scheduler_id);
        parent->twin_key = twin_key;
        parent->twin_id = seq->scheduler_id;
      }
      if (params.prompt_logprobs) {
        seq->prompt_logprobs.emplace(req.prompt_token_ids.size());
        r.prompt_logprobs_pending = true;
      }
      // The Request owns nothing: the track lives in the parent; an aliasing pointer with no owner.
      r.user_data = std::shared_ptr<void>(std::shared_ptr<void>{}, seq.get());
      parent->seqs.push_back(std::move(seq));
    }
    parent->unfinished = unfinished;
    parent->n = n;
    parent->max_tokens = std::max(1, max_tokens);
    ParentTrack& admitted = *parent;
    parents.emplace(parent->id, std::move(parent));
    // A grammar that admits nothing at all (not even its end) ends the request before it runs.
    bool dead = false;
    for (auto& seq : admitted.seqs) {
      if (seq->structured && !seq->finished && seq->num_output == 0 &&
          seq->structured->advance({}) == StructuredOutputState::Progress::kDeadEnd) {
        end_by_grammar(admitted, *seq, "the structured-output grammar admits no token at all");
        dead = true;
      }
    }
    if (dead) flush_parent(parents.find(admitted.id), Clock::now());
  }

  // A sequence of a resumed request, as if it had been preempted (recompute): its prompt and the
  // tokens already sent as outputs, nothing computed; the detokenizer, the stop-string window and
  // the grammar's matcher are brought to where the client's stream stopped.
  void resume_sequence(SequenceTrack& seq, const ResumedSequence& resumed, const EngineRequest& req,
                       std::shared_ptr<const MultimodalPrompt> mm, int max_tokens) {
    Request& r = scheduler.add_request(seq.scheduler_id, req.prompt_token_ids, max_tokens, req.cache_salt_hash,
                                       std::move(mm));
    for (std::int32_t t : resumed.token_ids) {
      r.append_output_token(t);
      seq.text += seq.detok->step(t);
    }
    kv.update_block_hashes(r);
    seq.num_output = static_cast<int>(resumed.token_ids.size());
    seq.sent_bytes = std::min(resumed.text_bytes, seq.text.size());
    if (seq.structured) seq.structured->advance(r.output_token_ids());
    r.user_data = std::shared_ptr<void>(std::shared_ptr<void>{}, &seq);
  }

  // ---- structured output ----
  GrammarCompiler& grammar_compiler() {
    if (!grammars) {
      // Made on first use: serving without structured output never builds the grammar vocabulary.
      grammars = std::make_unique<GrammarCompiler>(
          [this] {
            GrammarVocabulary v;
            v.logits_size = static_cast<int>(info.vocab_size);
            v.token_bytes.reserve(static_cast<std::size_t>(info.valid_vocab_size));
            for (std::int64_t id = 0; id < info.valid_vocab_size; ++id)
              v.token_bytes.push_back(tok->token_bytes(static_cast<std::int32_t>(id)));
            for (std::int64_t id : sampler.config().eos_token_ids)
              if (id >= 0 && id < info.vocab_size) v.stop_token_ids.push_back(static_cast<std::int32_t>(id));
            return v;
          },
          /*cache_capacity=*/256,
          [this] {
            {
              std::lock_guard lock(inbox_mutex);
              grammar_ready = true;
            }
            wake.notify_one();
          });
    }
    return *grammars;
  }

  std::unique_ptr<StructuredOutputState> make_structured_state(std::shared_ptr<const xgrammar::CompiledGrammar> grammar,
                                                               std::shared_ptr<const std::vector<std::int32_t>> filter,
                                                               const SamplingParams& params,
                                                               std::span<const std::int32_t> prompt) {
    // Where the prompt leaves the reasoning (the thinking budget's prompt summary): inside an open
    // block, the constraint waits for the end marker.
    kernels::ReasoningBudget markers;
    markers.start_ids = params.reasoning_start_ids;
    markers.end_ids = params.reasoning_end_ids;
    bool in_reasoning = false;
    if (!markers.start_ids.empty() && !markers.end_ids.empty()) {
      kernels::summarize_prompt(markers, prompt);
      in_reasoning = markers.prompt_in_block;
    }
    return std::make_unique<StructuredOutputState>(std::move(grammar), info.vocab_size, params.reasoning_end_ids,
                                                   in_reasoning, std::move(filter));
  }

  bool waiting_for_grammar(const std::string& id) const {
    return std::any_of(grammar_waits.begin(), grammar_waits.end(), [&](const GrammarWait& w) { return w.request.id == id; });
  }

  // Admits every request whose grammar has compiled; a failed compile ends the request with its error.
  bool admit_compiled() {
    bool any = false;
    for (auto it = grammar_waits.begin(); it != grammar_waits.end();) {
      if (it->grammar.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
        ++it;
        continue;
      }
      GrammarWait w = std::move(*it);
      it = grammar_waits.erase(it);
      any = true;
      const CompiledConstraint& c = w.grammar.get();
      if (!c.grammar) {
        RequestOutput out;
        out.request_id = w.request.id;
        out.finished = true;
        out.error = c.error;
        outbox.emplace_back(w.channel, std::move(out));
        continue;
      }
      admit(std::move(w.request), std::move(w.channel), c.grammar, c.token_filter);
    }
    return any;
  }

  void abort_grammar_wait(const std::string& id, std::optional<std::string> error, bool shutdown = false) {
    for (auto it = grammar_waits.begin(); it != grammar_waits.end(); ++it) {
      if (it->request.id != id) continue;
      RequestOutput out;
      out.request_id = id;
      out.finished = true;
      out.error = std::move(error);
      out.error_is_shutdown = shutdown;
      const int n = static_cast<int>(std::max<std::int64_t>(1, it->request.params.n));
      for (int i = 0; i < n; ++i) {
        SequenceDelta d;
        d.index = i;
        d.finish_reason = "abort";
        out.deltas.push_back(std::move(d));
      }
      outbox.emplace_back(it->channel, std::move(out));
      grammar_waits.erase(it);
      return;
    }
  }

  // Ends a sequence the grammar cannot continue (vLLM's finish_reason "error"): nothing is sampled
  // from an empty distribution, and the client is told why.
  void end_by_grammar(ParentTrack& p, SequenceTrack& seq, const std::string& why) {
    spdlog::warn("request {}: {}; finishing it with finish_reason \"error\"", seq.scheduler_id, why);
    scheduler.abort_request(seq.scheduler_id);
    finish_sequence(p, seq, "error", why);
    SequenceDelta d;
    d.index = seq.index;
    d.finish_reason = "error";
    d.stop_reason = why;
    if (!p.pending.deltas.empty() && p.pending.deltas.back().index == d.index) {
      p.pending.deltas.back().finish_reason = d.finish_reason;
      p.pending.deltas.back().stop_reason = d.stop_reason;
    } else {
      p.pending.deltas.push_back(std::move(d));
    }
  }

  // After a step's tokens: each constrained sequence's matcher takes them and computes its next mask.
  void advance_structured(std::span<const StepResult> results) {
    for (const StepResult& res : results) {
      SequenceTrack& seq = *track_of(*res.request);
      if (!seq.structured || seq.finished) continue;
      if (seq.structured->tokens_seen() == res.request->output_token_ids().size()) continue;
      switch (seq.structured->advance(res.request->output_token_ids())) {
        case StructuredOutputState::Progress::kOk:
          break;
        case StructuredOutputState::Progress::kRejected:
          end_by_grammar(*seq.parent, seq, "a token outside the structured-output grammar was generated");
          break;
        case StructuredOutputState::Progress::kDeadEnd:
          end_by_grammar(*seq.parent, seq, "the structured-output grammar cannot be continued by any token");
          break;
      }
    }
  }

  static StructuredOutputState* structured_of(const Request& r) { return track_of(r)->structured.get(); }

  // Client cancel (error empty) or engine-side end (error set): every unfinished sequence ends with
  // "abort" and the channel gets the final output.
  void abort_parent(const std::string& id, std::optional<std::string> error, bool shutdown = false) {
    auto it = parents.find(id);
    if (it == parents.end()) return;
    ParentTrack& p = *it->second;
    for (auto& seq : p.seqs) {
      if (seq->finished) continue;
      scheduler.abort_request(seq->scheduler_id);
      finish_sequence(p, *seq, "abort", std::monostate{});
      SequenceDelta d;
      d.index = seq->index;
      d.finish_reason = "abort";
      p.pending.deltas.push_back(std::move(d));
    }
    p.pending.error = std::move(error);
    p.pending.error_is_shutdown = shutdown;
    flush_parent(it, Clock::now());
  }

  void finish_sequence(ParentTrack& p, SequenceTrack& seq, const std::string& reason, StopReason stop) {
    seq.finished = true;
    seq.finish_reason = reason;
    seq.stop_reason = std::move(stop);
    --p.unfinished;
    p.last_finish_reason = reason;
  }

  void step() {
    const SchedulerOutput& out = scheduler.schedule();
    if (out.scheduled.empty()) {
      scheduler.update_from_output({});
      publish(true);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      return;
    }
    const Clock::time_point started = Clock::now();
    for (const ScheduledRequest& s : out.scheduled) {
      ParentTrack& p = *track_of(*s.request)->parent;
      if (!p.scheduled_once) {
        p.scheduled_once = true;
        p.first_scheduled = started;
        stats_pending_queue.push_back(seconds(started - p.arrival));
      }
    }
    const kernels::TensorView logits = runner.execute(
        out,
        [this](const ScheduledRequest& s, int first, int count, const float* rows) {
          collect_prompt_logprobs(s, first, count, rows);
        },
        [this](const ScheduledRequest& s) {
          return track_of(*s.request)->images.rows_for(*s.request->mm, *config.vision_encoder, s.start_position,
                                                       s.num_scheduled_tokens);
        });
    // Image features the prefill is past are dropped (a recompute encodes again).
    for (const ScheduledRequest& s : out.scheduled) {
      if (s.request->mm)
        track_of(*s.request)->images.release_before(*s.request->mm, s.start_position + s.num_scheduled_tokens);
    }
    // One row per sampling request, or 1 + d rows for a request verifying d drafts (step_sampling.h).
    step_sampling.add_rows(out, logits.dim(0), sampler, [](const Request& r) { return &track_of(r)->sampling; });
    structured_rows.apply(out, step_sampling, sampler, structured_of, info.vocab_size);
    std::vector<SampleOutput> sampled = sampler.sample_step(logits);
    const std::span<const std::int32_t> fork_tokens = step_sampling.sample_forks(
        out, logits, sampler, [](const Request& r) { return &track_of(r)->sampling; },
        [](const Request& r) {
          const StructuredOutputState* st = structured_of(r);
          return st && st->constrained() ? st->mask() : std::span<const std::int32_t>();
        });
    share_prompt_logprobs(out);
    const int step_tokens = out.total_num_scheduled_tokens;
    const std::vector<StepResult>& results =
        scheduler.update_from_emitted(step_sampling.accept(out, sampled), fork_tokens);
    runner.apply_verify_outcomes(out);
    // Drafts for the next step, before the forks: the MTP drafter writes its KV rows into the blocks
    // of the requests it ran, and a fork copies its source's partial block (every layer, the MTP's
    // too) afterwards. It overwrites the step's workspace, which nothing reads after sampling.
    if (drafter) drafter->propose_step(out, num_speculative_tokens, info.vocab_size, scheduler.running());
    runner.apply_forks(out);
    const Clock::time_point now = Clock::now();
    std::vector<ParentTrack*> touched;
    for (std::size_t i = 0; i < results.size(); ++i) {
      const StepResult& res = results[i];
      SequenceTrack& seq = *track_of(*res.request);
      ParentTrack& p = *seq.parent;
      if (seq.finished) continue;  // a stop string ended it at an earlier token of this step
      if (p.num_cached_tokens < 0) p.num_cached_tokens = std::max(0, res.request->num_cached_tokens);
      SampleOutput& sample = res.fork_index >= 0 ? step_sampling.fork_output(res.scheduled_index, res.fork_index)
                                                 : sampled[step_sampling.row(res.scheduled_index, res.token_index)];
      on_token(seq, *res.request, res, sample, now);
      if (std::find(touched.begin(), touched.end(), &p) == touched.end()) touched.push_back(&p);
    }
    advance_structured(results);
    for (ParentTrack* p : touched) flush_parent(parents.find(p->id), now);
    // Drafts the grammar refuses are cut before the next step schedules them (after the matchers took
    // this step's tokens: the drafts follow them).
    if (drafter) StructuredRows::cut_drafts(scheduler.running(), structured_of);
    {
      std::lock_guard lock(stats_mutex);
      stats.iteration_tokens.observe(step_tokens);
      stats.engine_step_duration.observe(seconds(now - started));
      for (double q : stats_pending_queue) stats.request_queue_time.observe(q);
      stats_pending_queue.clear();
      if (!results.empty()) stats.last_progress = now;
    }
    publish(true);
  }

  // Fork children never compute the prompt: they get the prompt logprobs their source has just
  // completed (before the source's first token hands its own copy out).
  void share_prompt_logprobs(const SchedulerOutput& out) {
    for (const ScheduledRequest& s : out.scheduled) {
      const SequenceTrack& source = *track_of(*s.request);
      if (s.fork_children.empty() || !source.prompt_logprobs) continue;
      for (const Request* child : s.fork_children) {
        SequenceTrack& c = *track_of(*child);
        if (c.prompt_logprobs) c.prompt_logprobs = source.prompt_logprobs;
      }
    }
  }

  // Rows first .. first + count - 1 of a prompt score prompt tokens first + 1 .. first + count,
  // exactly as a sampled token is scored (raw logprobs over the valid vocabulary, rank, top-N).
  void collect_prompt_logprobs(const ScheduledRequest& s, int first, int count, const float* rows) {
    SequenceTrack& seq = *track_of(*s.request);
    if (!seq.prompt_logprobs || !seq.params.prompt_logprobs) return;
    PromptLogprobs& out = *seq.prompt_logprobs;
    const std::span<const std::int32_t> prompt = s.request->prompt_token_ids();
    const auto V = static_cast<std::size_t>(info.vocab_size);
    const auto valid = static_cast<std::size_t>(info.valid_vocab_size);
    const std::int64_t num_top =
        *seq.params.prompt_logprobs == -1 ? info.valid_vocab_size : *seq.params.prompt_logprobs;
#pragma omp parallel for schedule(dynamic, 1) if (count > 1)
    for (int i = 0; i < count; ++i) {
      const auto pos = static_cast<std::size_t>(first + i);
      const std::int32_t target = prompt[pos + 1];
      // A prompt may name a padding row of the lm_head; only then is the row scored in full.
      const std::size_t width = static_cast<std::size_t>(target) < valid ? valid : V;
      out[pos + 1] = compute_sample_logprobs(std::span<const float>(rows + static_cast<std::size_t>(i) * V, width),
                                             target, num_top);
    }
  }

  void on_token(SequenceTrack& seq, const Request& r, const StepResult& res, SampleOutput& sample,
                Clock::time_point now) {
    ParentTrack& p = *seq.parent;
    ++seq.num_output;
    {
      std::lock_guard lock(stats_mutex);
      // Inter-token latency once per request and step, as vLLM: the later tokens of a verify step
      // arrive at the same time.
      if (!p.first_token_seen) stats.time_to_first_token.observe(seconds(now - p.arrival));
      else if (seq.num_output > 1 && res.token_index == 0)
        stats.inter_token_latency.observe(seconds(now - seq.last_token_time));
    }
    if (!p.first_token_seen) p.first_token = now;
    p.first_token_seen = true;
    p.last_token = now;
    seq.last_token_time = now;
    const SamplingParams& params = seq.params;
    const bool stopped_by_token = res.status == RequestStatus::kFinishedStopped;
    const bool length_capped = res.status == RequestStatus::kFinishedLength;
    // vLLM: a stop token's own text is not detokenized unless include_stop_str_in_output.
    std::size_t check_from = seq.text.size();
    if (!(stopped_by_token && !params.include_stop_str_in_output)) seq.text += seq.detok->step(res.token);
    if (params.min_tokens > 0 && seq.num_output <= params.min_tokens) check_from = seq.text.size();
    SequenceDelta d;
    d.index = seq.index;
    d.token_ids.push_back(res.token);
    if (sample.logprobs) d.logprobs.push_back(std::move(*sample.logprobs));
    if (seq.num_output == 1 && seq.prompt_logprobs) {
      d.prompt_logprobs = std::move(seq.prompt_logprobs);
      seq.prompt_logprobs.reset();
    }
    if (!stopped_by_token && seq.num_output > params.min_tokens) {
      if (auto match = find_stop_string(seq.text, seq.text.size() - check_from, params.stop,
                                        params.include_stop_str_in_output)) {
        seq.text.resize(match->truncate_to);
        if (!length_capped) scheduler.abort_request(r.id());
        finish_sequence(p, seq, "stop", match->stop);
      }
    }
    if (!seq.finished && stopped_by_token) finish_sequence(p, seq, "stop", seq.token_stop_reason);
    if (!seq.finished && length_capped) finish_sequence(p, seq, "length", std::monostate{});
    const std::size_t end =
        seq.finished ? seq.text.size()
                     : std::max(seq.sent_bytes, without_last_chars(seq.text, seq.holdback_chars));
    if (end > seq.sent_bytes) d.text = seq.text.substr(seq.sent_bytes, end - seq.sent_bytes);
    seq.sent_bytes = std::max(seq.sent_bytes, end);
    if (seq.finished) {
      d.finish_reason = seq.finish_reason;
      d.stop_reason = seq.stop_reason;
    }
    // A verify step gives a sequence several tokens at once: one delta per sequence per output.
    if (!p.pending.deltas.empty() && p.pending.deltas.back().index == d.index) {
      SequenceDelta& last = p.pending.deltas.back();
      last.token_ids.insert(last.token_ids.end(), d.token_ids.begin(), d.token_ids.end());
      last.text += d.text;
      for (SampleLogprobs& lp : d.logprobs) last.logprobs.push_back(std::move(lp));
      last.finish_reason = std::move(d.finish_reason);
      last.stop_reason = std::move(d.stop_reason);
    } else {
      p.pending.deltas.push_back(std::move(d));
    }
  }

  void flush_parent(std::unordered_map<std::string, std::unique_ptr<ParentTrack>>::iterator it,
                    Clock::time_point now) {
    ParentTrack& p = *it->second;
    RequestOutput out = std::move(p.pending);
    p.pending = RequestOutput{};
    out.request_id = p.id;
    out.num_prompt_tokens = p.num_prompt_tokens;
    out.num_cached_tokens = std::max(0, p.num_cached_tokens);
    out.finished = p.unfinished == 0;
    const bool finished = out.finished;
    if (finished) {
      std::lock_guard lock(stats_mutex);
      std::int64_t generated = 0;
      int longest = 0;
      for (const auto& s : p.seqs) {
        generated += s->num_output;
        longest = std::max(longest, s->num_output);
      }
      stats.e2e_request_latency.observe(seconds(now - p.arrival));
      if (p.first_token_seen) {
        stats.request_prefill_time.observe(seconds(p.first_token - p.first_scheduled));
        stats.request_decode_time.observe(seconds(p.last_token - p.first_token));
        stats.request_inference_time.observe(seconds(p.last_token - p.first_scheduled));
        if (longest > 1) stats.request_time_per_output_token.observe(seconds(p.last_token - p.first_token) / (longest - 1));
      }
      stats.request_params_n.observe(p.n);
      stats.request_params_max_tokens.observe(p.max_tokens);
      stats.request_max_num_generation_tokens.observe(longest);
      stats.request_prompt_tokens.observe(p.num_prompt_tokens);
      stats.request_generation_tokens.observe(static_cast<double>(generated));
      ++stats.requests_finished[out.error ? "error" : p.last_finish_reason];
    }
    outbox.emplace_back(p.channel, std::move(out));
    if (finished) {
      if (p.twin_key) twins.remove(*p.twin_key, p.twin_id);
      parents.erase(it);
    }
  }

  // Stats first, then the outputs: a consumer that sees its request finish sees stats that
  // include it (and the resources it freed).
  void publish(bool has_work) {
    refresh_stats(has_work);
    for (auto& [channel, out] : outbox) channel->push(std::move(out));
    outbox.clear();
  }

  void refresh_stats(bool has_work) {
    std::lock_guard lock(stats_mutex);
    fill_stats_locked(has_work);
  }

  void fill_stats_locked(bool has_work) {
    stats.scheduler = scheduler.metrics();
    stats.has_work = has_work && scheduler.has_unfinished_requests();
    if (!stats.has_work) stats.last_progress = Clock::now();
    stats.num_steps = stats.scheduler.num_steps;
  }

  std::shared_ptr<const model::Qwen35MoeModel> model;
  std::shared_ptr<const tokenizer::Tokenizer> tok;
  EngineConfig config;
  EngineInfo info;
  ImageRules image_rules;  // set by Engine's constructor when it has a vision encoder
  KvEventRecorder kv_event_log;                     // engine thread only; before the stores that point at it
  std::unique_ptr<KvEventPublisher> kv_publisher;   // null: --kv-events-config off
  StateSnapshotStore snapshots;
  KvCacheManager kv;
  StateSlotPool slots;
  Scheduler scheduler;
  Sampler sampler;
  ModelRunner runner;
  StepSampling step_sampling;
  std::shared_ptr<Drafter> drafter;  // null: no speculative decoding
  int num_speculative_tokens = 0;
  std::unordered_map<std::string, std::unique_ptr<ParentTrack>> parents;  // engine thread only
  PromptTwinIndex twins;                                                    // engine thread only
  std::vector<double> stats_pending_queue;
  std::vector<std::pair<std::shared_ptr<OutputChannel>, RequestOutput>> outbox;
  std::deque<GrammarWait> grammar_waits;  // engine thread only
  StructuredRows structured_rows;

  // Inbox (any thread).
  std::mutex inbox_mutex;
  std::condition_variable wake;
  std::deque<EngineRequest> inbox;
  std::vector<std::string> abort_inbox;
  std::unordered_map<std::string, std::shared_ptr<OutputChannel>> channels_pending;  // under inbox_mutex
  bool accepting = true;
  bool stop_hard = false;
  bool grammar_ready = false;  // a compile finished since the engine last looked
  std::atomic<bool> debug_stall{false};

  // Lock order: inbox_mutex before stats_mutex (submit() reads the waiting count under the inbox
  // lock); nothing takes them the other way round.
  mutable std::mutex stats_mutex;
  EngineStats stats;

  std::thread thread;
  // Last member: destroyed first, so its worker never calls back into a half-destroyed engine.
  std::unique_ptr<GrammarCompiler> grammars;
};

Engine::Engine(std::shared_ptr<const model::Qwen35MoeModel> model, std::shared_ptr<const tokenizer::Tokenizer> tok,
               EngineConfig config) {
  const ModelConfig& mc = model->config();
  if (config.max_model_len <= 0) config.max_model_len = static_cast<int>(mc.max_position_embeddings);
  if (config.block_size <= 0) throw EngineConfigError("--block-size must be positive");
  if (config.snapshot_interval % config.block_size != 0)
    throw EngineConfigError(fmt::format("the GDN snapshot interval ({}) must be a multiple of the block size ({})",
                                        config.snapshot_interval, config.block_size));
  const int num_gdn = static_cast<int>(mc.num_linear_attention_layers());
  const int num_attn = static_cast<int>(mc.num_full_attention_layers());
  CachePlanInput in;
  in.budget_bytes = config.cache_memory_bytes;
  in.max_num_seqs = config.max_num_seqs;
  in.max_num_seqs_explicit = config.max_num_seqs > 0;
  in.max_model_len = config.max_model_len;
  in.block_size = config.block_size;
  if (config.mtp && !model->has_mtp()) {
    const std::string why = model->checkpoint().mtp_unavailable_reason();
    throw EngineConfigError("MTP speculative decoding is unavailable: " +
                            (why.empty() ? std::string("the model's MTP head is not loaded") : why));
  }
  // The MTP layer's KV lives in the same blocks, as one more attention layer.
  in.kv_block_bytes = model::PagedKvCache::block_bytes(num_attn + (config.mtp ? 1 : 0), config.block_size,
                                                      static_cast<int>(mc.num_key_value_heads),
                                                      static_cast<int>(mc.head_dim), config.kv_dtype);
  in.state_bytes_per_seq = num_gdn > 0 ? model::GdnStateArena::entry_bytes(num_gdn, model->gdn_dims()) : 0;
  if (!config.drafter && !config.mtp) config.num_speculative_tokens = 0;
  if (config.mtp && config.num_speculative_tokens < 1)
    throw EngineConfigError("MTP speculative decoding needs num_speculative_tokens >= 1");
  if (config.num_speculative_tokens < 0 || config.num_speculative_tokens > kMaxSpeculativeTokens)
    throw EngineConfigError(fmt::format("num_speculative_tokens {} is outside 0 .. {}", config.num_speculative_tokens,
                                        kMaxSpeculativeTokens));
  in.rollback_entries_per_seq = config.num_speculative_tokens;
  in.prefix_caching = config.enable_prefix_caching;
  in.snapshot_fraction = config.snapshot_fraction;
  in.num_kv_blocks_override = config.num_kv_blocks_override;
  in.kv_dtype_name = kv_dtype_name(config.kv_dtype);
  in.device_label = model->backend().device() == kernels::Device::kCpu ? "CPU" : "GPU";
  const CachePlan plan = plan_cache(in);
  if (config.max_num_batched_tokens < 1) throw EngineConfigError("--max-num-batched-tokens must be at least 1");
  info_.max_model_len = config.max_model_len;
  info_.max_num_seqs = plan.max_num_seqs;
  info_.max_num_batched_tokens = config.max_num_batched_tokens;
  info_.block_size = config.block_size;
  info_.vocab_size = mc.vocab_size;
  info_.valid_vocab_size = std::min<std::int64_t>(mc.vocab_size, tok->vocab_size());
  info_.cache = plan;
  info_.prefix_caching = config.enable_prefix_caching;
  info_.kv_cache_dtype = kv_dtype_name(config.kv_dtype);
  ImageRules image_rules;
  if (config.vision_encoder) {
    if (!mc.image_token_id)
      throw EngineConfigError("a vision encoder was given for a model whose config names no image_token_id");
    if (config.vision_encoder->out_hidden() != mc.hidden_size)
      throw EngineConfigError(fmt::format("the vision encoder's rows have {} values; the model's hidden size is {}",
                                          config.vision_encoder->out_hidden(), mc.hidden_size));
    image_rules.image_token_id = *mc.image_token_id;
    image_rules.spatial_merge_size = config.vision_encoder->spatial_merge_size();
  }
  // CUDA graphs: the sizes as vLLM plans them for the planned max_num_seqs; captured below, before
  // the first step.
  const CudaGraphPlan graphs =
      plan_cuda_graphs(config.cuda_graphs, plan.max_num_seqs, config.max_num_batched_tokens, config.num_speculative_tokens);
  for (const std::string& w : graphs.warnings) spdlog::warn("{}", w);
  spdlog::info("{}", describe_cuda_graphs(config.cuda_graphs, graphs));
  info_.cuda_graph_sizes = graphs.sizes;
  impl_ = std::make_unique<Impl>(std::move(model), std::move(tok), config, plan, info_);
  impl_->image_rules = image_rules;
  impl_->runner.capture_graphs();
  impl_->thread = std::thread([this] { impl_->run(); });
}

Engine::~Engine() { shutdown(std::chrono::milliseconds(0)); }

std::shared_ptr<OutputChannel> Engine::submit(EngineRequest request) {
  Impl& m = *impl_;
  if (request.prompt_token_ids.empty())
    throw EngineRejected(EngineRejected::Reason::kInvalid, "the prompt is empty");
  for (std::int32_t id : request.prompt_token_ids) {
    if (id < 0 || id >= info_.vocab_size)
      throw EngineRejected(EngineRejected::Reason::kInvalid,
                           fmt::format("token id {} is out of vocabulary (size {})", id, info_.vocab_size));
  }
  if (static_cast<int>(request.prompt_token_ids.size()) >= info_.max_model_len)
    throw EngineRejected(EngineRejected::Reason::kInvalid,
                         fmt::format("the prompt ({} tokens) leaves no room to generate within max_model_len {}",
                                     request.prompt_token_ids.size(), info_.max_model_len));
  if (!request.images.empty()) {
    if (!m.config.vision_encoder)
      throw EngineRejected(EngineRejected::Reason::kInvalid,
                           "this server takes no images (no vision tower is loaded)");
    try {
      make_multimodal_prompt(request.images, request.prompt_token_ids, m.image_rules);
      for (const ImageInput& im : request.images) m.config.vision_encoder->validate(*im.pixels);
    } catch (const std::invalid_argument& e) {
      throw EngineRejected(EngineRejected::Reason::kInvalid, e.what());
    }
  }
  auto channel = std::make_shared<OutputChannel>();
  if (request.notifier) channel->set_notifier(std::move(request.notifier));
  {
    std::lock_guard lock(m.inbox_mutex);
    if (!m.accepting) throw EngineRejected(EngineRejected::Reason::kShuttingDown, "the server is shutting down");
    int waiting;
    {
      std::lock_guard stats_lock(m.stats_mutex);
      waiting = m.stats.scheduler.num_waiting;
    }
    if (waiting + static_cast<int>(m.inbox.size()) >= m.config.max_waiting_requests)
      throw EngineRejected(EngineRejected::Reason::kOverloaded,
                           fmt::format("the waiting queue is full ({} requests)", m.config.max_waiting_requests));
    if (m.channels_pending.count(request.id))
      throw EngineRejected(EngineRejected::Reason::kInvalid, fmt::format("duplicate request id {}", request.id));
    m.channels_pending.emplace(request.id, channel);
    m.inbox.push_back(std::move(request));
  }
  m.wake.notify_one();
  return channel;
}

void Engine::abort(const std::string& request_id) {
  {
    std::lock_guard lock(impl_->inbox_mutex);
    impl_->abort_inbox.push_back(request_id);
  }
  impl_->wake.notify_one();
}

EngineStats Engine::stats() const {
  EngineStats s;
  {
    std::lock_guard lock(impl_->stats_mutex);
    s = impl_->stats;
  }
  // Never both locks at once here: submit() holds the inbox lock while it reads the stats.
  std::lock_guard inbox_lock(impl_->inbox_mutex);
  s.scheduler.num_waiting += static_cast<int>(impl_->inbox.size());
  if (!impl_->inbox.empty()) s.has_work = true;
  return s;
}

void Engine::shutdown(std::chrono::milliseconds drain) {
  if (!impl_ || !impl_->thread.joinable()) return;
  {
    std::lock_guard lock(impl_->inbox_mutex);
    impl_->accepting = false;
  }
  const auto deadline = Clock::now() + drain;
  while (Clock::now() < deadline && stats().has_work) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  {
    std::lock_guard lock(impl_->inbox_mutex);
    impl_->stop_hard = true;
  }
  impl_->wake.notify_one();
  impl_->thread.join();
}

void Engine::set_debug_stall(bool stalled) {
  impl_->debug_stall = stalled;
  impl_->wake.notify_one();
}

void Engine::set_corrupt_gdn_state(bool on) { impl_->runner.set_corrupt_gdn_state(on); }

}  // namespace fp4serve::engine
