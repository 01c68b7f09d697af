// The engine process's messages survive the socket: every field of EngineRequest (sampling and
// structured-output parameters, images, resume state), RequestOutput, EngineStats and EngineInfo
// comes back equal after msgpack and a length-prefixed frame.
#include <gtest/gtest.h>

#include <sys/socket.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <thread>
#include <unistd.h>

#include "engine/ipc/frame_io.h"
#include "engine/ipc/info_codec.h"
#include "engine/ipc/output_codec.h"
#include "engine/ipc/request_codec.h"
#include "engine/ipc/stats_codec.h"

namespace fp4serve::engine::ipc {
namespace {

using nlohmann::json;

// Through msgpack bytes, as on the wire.
json wire(const json& j) { return json::from_msgpack(json::to_msgpack(j)); }

EngineRequest full_request() {
  EngineRequest r;
  r.id = "chatcmpl-1";
  r.prompt_token_ids = {1, 2, 248056, 7};
  auto px = std::make_shared<vision::PixelPatches>();
  px->grid = {1, 4, 6};
  px->patch_dim = 3;
  px->values = {0.5f, -1.25f, 3.0e-8f, 1e30f, -0.0f, 7.0f};
  r.images.push_back({px, 2, 1, {0x0123456789abcdefull, 0xfedcba9876543210ull}});
  SamplingParams& p = r.params;
  p.n = 3;
  p.presence_penalty = 0.5;
  p.frequency_penalty = -0.25;
  p.repetition_penalty = 1.1;
  p.temperature = 0.7;
  p.top_p = 0.9;
  p.top_k = 40;
  p.min_p = 0.05;
  p.seed = -7;
  p.stop = {"\n\n", "END"};
  p.stop_token_ids = {248046, 248044};
  p.include_stop_str_in_output = true;
  p.ignore_eos = true;
  p.max_tokens = std::nullopt;
  p.min_tokens = 3;
  p.logprobs = 5;
  p.prompt_logprobs = -1;
  p.logit_bias = {{11, -100.0}, {12, 2.5}};
  p.bad_words = {"bad"};
  p.bad_words_token_ids = {{4, 5}, {6}};
  p.allowed_token_ids = std::vector<int64_t>{1, 2, 3};
  p.logprob_token_ids = std::vector<int64_t>{9};
  p.thinking_token_budget = 100;
  p.reasoning_start_ids = {248068};
  p.reasoning_end_ids = {248069};
  StructuredOutputsParams so;
  so.kind = StructuredOutputsParams::Kind::kJson;
  so.spec = R"({"type":"object"})";
  so.choice = {"a", "b"};
  so.disable_any_whitespace = true;
  so.disable_additional_properties = true;
  so.whitespace_pattern = "[ ]?";
  p.structured_outputs = so;
  r.cache_salt_hash = 0xffffffffffffffffull;
  r.detokenize.skip_special_tokens = false;
  r.detokenize.spaces_between_special_tokens = false;
  r.resumed.push_back({1, {5, 6, 7}, 12, false});
  r.resumed.push_back({2, {8}, 3, true});
  return r;
}

TEST(IpcCodec, EngineRequestRoundTripsEveryField) {
  const EngineRequest r = full_request();
  const EngineRequest d = decode_engine_request(wire(encode_engine_request(r)));
  EXPECT_EQ(d.id, r.id);
  EXPECT_EQ(d.prompt_token_ids, r.prompt_token_ids);
  ASSERT_EQ(d.images.size(), 1u);
  EXPECT_EQ(d.images[0].offset, 2);
  EXPECT_EQ(d.images[0].num_tokens, 1);
  EXPECT_EQ(d.images[0].content_hash, r.images[0].content_hash);
  ASSERT_TRUE(d.images[0].pixels);
  EXPECT_EQ(d.images[0].pixels->grid.h, 4);
  EXPECT_EQ(d.images[0].pixels->grid.w, 6);
  EXPECT_EQ(d.images[0].pixels->patch_dim, 3);
  EXPECT_EQ(0, std::memcmp(d.images[0].pixels->values.data(), r.images[0].pixels->values.data(), 6 * sizeof(float)));
  const SamplingParams &a = d.params, &b = r.params;
  EXPECT_EQ(a.n, b.n);
  EXPECT_EQ(a.presence_penalty, b.presence_penalty);
  EXPECT_EQ(a.frequency_penalty, b.frequency_penalty);
  EXPECT_EQ(a.repetition_penalty, b.repetition_penalty);
  EXPECT_EQ(a.temperature, b.temperature);
  EXPECT_EQ(a.top_p, b.top_p);
  EXPECT_EQ(a.top_k, b.top_k);
  EXPECT_EQ(a.min_p, b.min_p);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.stop, b.stop);
  EXPECT_EQ(a.stop_token_ids, b.stop_token_ids);
  EXPECT_EQ(a.include_stop_str_in_output, b.include_stop_str_in_output);
  EXPECT_EQ(a.ignore_eos, b.ignore_eos);
  EXPECT_EQ(a.max_tokens, b.max_tokens);
  EXPECT_EQ(a.min_tokens, b.min_tokens);
  EXPECT_EQ(a.logprobs, b.logprobs);
  EXPECT_EQ(a.prompt_logprobs, b.prompt_logprobs);
  EXPECT_EQ(a.logit_bias, b.logit_bias);
  EXPECT_EQ(a.bad_words, b.bad_words);
  EXPECT_EQ(a.bad_words_token_ids, b.bad_words_token_ids);
  EXPECT_EQ(a.allowed_token_ids, b.allowed_token_ids);
  EXPECT_EQ(a.logprob_token_ids, b.logprob_token_ids);
  EXPECT_EQ(a.thinking_token_budget, b.thinking_token_budget);
  EXPECT_EQ(a.reasoning_start_ids, b.reasoning_start_ids);
  EXPECT_EQ(a.reasoning_end_ids, b.reasoning_end_ids);
  ASSERT_TRUE(a.structured_outputs);
  EXPECT_EQ(a.structured_outputs->kind, b.structured_outputs->kind);
  EXPECT_EQ(a.structured_outputs->spec, b.structured_outputs->spec);
  EXPECT_EQ(a.structured_outputs->choice, b.structured_outputs->choice);
  EXPECT_EQ(a.structured_outputs->disable_any_whitespace, true);
  EXPECT_EQ(a.structured_outputs->disable_additional_properties, true);
  EXPECT_EQ(a.structured_outputs->whitespace_pattern, b.structured_outputs->whitespace_pattern);
  EXPECT_EQ(d.cache_salt_hash, r.cache_salt_hash);
  EXPECT_FALSE(d.detokenize.skip_special_tokens);
  EXPECT_FALSE(d.detokenize.spaces_between_special_tokens);
  EXPECT_EQ(d.arrival_time, r.arrival_time);
  ASSERT_EQ(d.resumed.size(), 2u);
  EXPECT_EQ(d.resumed[0].index, 1);
  EXPECT_EQ(d.resumed[0].token_ids, (std::vector<std::int32_t>{5, 6, 7}));
  EXPECT_EQ(d.resumed[0].text_bytes, 12u);
  EXPECT_FALSE(d.resumed[0].finished);
  EXPECT_TRUE(d.resumed[1].finished);
}

TEST(IpcCodec, DefaultRequestRoundTripsWithNulls) {
  EngineRequest r;
  r.id = "x";
  r.prompt_token_ids = {1};
  const EngineRequest d = decode_engine_request(wire(encode_engine_request(r)));
  EXPECT_FALSE(d.params.seed);
  EXPECT_EQ(d.params.max_tokens, 16);
  EXPECT_FALSE(d.params.structured_outputs);
  EXPECT_FALSE(d.params.allowed_token_ids);
  EXPECT_TRUE(d.images.empty());
  EXPECT_TRUE(d.resumed.empty());
  EXPECT_EQ(encode_engine_request(d), encode_engine_request(r));
}

TEST(IpcCodec, MalformedRequestThrows) {
  json j = encode_engine_request(full_request());
  j["params"].erase("top_k");
  EXPECT_THROW(decode_engine_request(j), json::exception);
  EXPECT_THROW(decode_engine_request(json("not an object")), json::exception);
}

TEST(IpcCodec, RequestOutputRoundTripsDeltasLogprobsAndReasons) {
  RequestOutput out;
  out.request_id = "cmpl-9";
  SequenceDelta d0;
  d0.index = 0;
  d0.token_ids = {3, 4};
  d0.text = "h\xc3\xa9llo";
  d0.logprobs.push_back({{3, -0.5f}, 1, {{3, -0.5f}, {8, -1.75f}}});
  d0.logprobs.push_back({{4, -std::numeric_limits<float>::infinity()}, 7, {}});
  d0.prompt_logprobs = PromptLogprobs{std::nullopt, SampleLogprobs{{2, -3.0f}, 2, {{1, -0.1f}}}};
  d0.finish_reason = "stop";
  d0.stop_reason = std::string("END");
  SequenceDelta d1;
  d1.index = 1;
  d1.finish_reason = "stop";
  d1.stop_reason = std::int64_t{248046};
  SequenceDelta d2;
  d2.index = 2;
  out.deltas = {d0, d1, d2};
  out.num_prompt_tokens = 11;
  out.num_cached_tokens = 8;
  out.finished = true;
  out.error = "server shutting down";
  out.error_is_shutdown = true;
  const RequestOutput r = decode_request_output(wire(encode_request_output(out)));
  EXPECT_EQ(r.request_id, "cmpl-9");
  ASSERT_EQ(r.deltas.size(), 3u);
  EXPECT_EQ(r.deltas[0].token_ids, d0.token_ids);
  EXPECT_EQ(r.deltas[0].text, d0.text);
  ASSERT_EQ(r.deltas[0].logprobs.size(), 2u);
  EXPECT_EQ(r.deltas[0].logprobs[0].sampled.token, 3);
  EXPECT_EQ(r.deltas[0].logprobs[0].sampled.logprob, -0.5f);
  EXPECT_EQ(r.deltas[0].logprobs[0].sampled_rank, 1);
  EXPECT_EQ(r.deltas[0].logprobs[0].top[1].logprob, -1.75f);
  EXPECT_TRUE(std::isinf(r.deltas[0].logprobs[1].sampled.logprob));
  ASSERT_TRUE(r.deltas[0].prompt_logprobs);
  EXPECT_FALSE((*r.deltas[0].prompt_logprobs)[0]);
  EXPECT_EQ((*r.deltas[0].prompt_logprobs)[1]->sampled.token, 2);
  EXPECT_EQ(std::get<std::string>(r.deltas[0].stop_reason), "END");
  EXPECT_EQ(std::get<std::int64_t>(r.deltas[1].stop_reason), 248046);
  EXPECT_TRUE(std::holds_alternative<std::monostate>(r.deltas[2].stop_reason));
  EXPECT_FALSE(r.deltas[2].finished());
  EXPECT_FALSE(r.deltas[1].prompt_logprobs);
  EXPECT_EQ(r.num_prompt_tokens, 11);
  EXPECT_EQ(r.num_cached_tokens, 8);
  EXPECT_TRUE(r.finished);
  EXPECT_EQ(r.error, out.error);
  EXPECT_TRUE(r.error_is_shutdown);
}

TEST(IpcCodec, EngineStatsRoundTripsCountersHistogramsAndProgressTime) {
  EngineStats s;
  s.scheduler.num_running = 3;
  s.scheduler.num_waiting = 2;
  s.scheduler.kv_cache_usage = 0.375;
  s.scheduler.prefix_cache_hits = 1234567890123;
  s.scheduler.spec_decode.num_speculative_tokens = 2;
  s.scheduler.spec_decode.num_accepted_tokens_per_pos[1] = 42;
  s.requests_finished = {{"stop", 5}, {"abort", 1}};
  s.time_to_first_token.observe(0.02);
  s.time_to_first_token.observe(3.0);
  s.request_prompt_tokens = Histogram(one_two_five_buckets(100));
  s.request_prompt_tokens.observe(17);
  s.last_progress = std::chrono::steady_clock::now();
  s.has_work = true;
  s.num_steps = 99;
  s.engine_restarts = 4;
  const EngineStats r = decode_engine_stats(wire(encode_engine_stats(s)));
  EXPECT_EQ(r.scheduler.num_running, 3);
  EXPECT_EQ(r.scheduler.num_waiting, 2);
  EXPECT_EQ(r.scheduler.kv_cache_usage, 0.375);
  EXPECT_EQ(r.scheduler.prefix_cache_hits, 1234567890123);
  EXPECT_EQ(r.scheduler.spec_decode.num_accepted_tokens_per_pos[1], 42);
  EXPECT_EQ(r.requests_finished, s.requests_finished);
  EXPECT_EQ(r.time_to_first_token.counts(), s.time_to_first_token.counts());
  EXPECT_EQ(r.time_to_first_token.upper_bounds(), s.time_to_first_token.upper_bounds());
  EXPECT_EQ(r.time_to_first_token.count(), 2u);
  EXPECT_EQ(r.time_to_first_token.sum(), s.time_to_first_token.sum());
  EXPECT_EQ(r.request_prompt_tokens.counts(), s.request_prompt_tokens.counts());
  EXPECT_EQ(r.last_progress, s.last_progress);
  EXPECT_TRUE(r.has_work);
  EXPECT_EQ(r.num_steps, 99);
  EXPECT_EQ(r.engine_restarts, 4);
  EXPECT_EQ(encode_engine_stats(r), encode_engine_stats(s));
}

TEST(IpcCodec, EngineInfoRoundTripsTheCachePlan) {
  EngineInfo i;
  i.max_model_len = 8192;
  i.max_num_seqs = 64;
  i.max_num_batched_tokens = 2048;
  i.block_size = 16;
  i.vocab_size = 248320;
  i.valid_vocab_size = 248077;
  i.cache.num_kv_blocks = 1000;
  i.cache.kv_bytes = 1ull << 33;
  i.cache.max_concurrency = 1.5;
  i.cache.log_lines = {"KV cache: ...", "GDN: ..."};
  i.prefix_caching = false;
  i.kv_cache_dtype = "fp8_e4m3";
  const EngineInfo r = decode_engine_info(wire(encode_engine_info(i)));
  EXPECT_EQ(encode_engine_info(r), encode_engine_info(i));
  EXPECT_EQ(r.cache.log_lines, i.cache.log_lines);
  EXPECT_EQ(r.kv_cache_dtype, "fp8_e4m3");
  EXPECT_FALSE(r.prefix_caching);
}

TEST(IpcFrames, MessagesCrossASocketInOrderAndEofEndsTheStream) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  const json big{{"t", "out"}, {"text", std::string(300000, 'x')}};
  std::thread writer([&] {
    EXPECT_TRUE(write_message(sv[0], json{{"t", "ready"}}));
    EXPECT_TRUE(write_message(sv[0], big));
    ::close(sv[0]);
  });
  auto a = read_message(sv[1]);
  auto b = read_message(sv[1]);
  writer.join();
  ASSERT_TRUE(a && b);
  EXPECT_EQ((*a)["t"], "ready");
  EXPECT_EQ(*b, big);
  EXPECT_FALSE(read_message(sv[1])) << "EOF";
  ::close(sv[1]);
}

TEST(IpcFrames, GarbageAndTruncatedFramesAreABrokenStream) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  const std::uint8_t bad[] = {3, 0, 0, 0, 0xc1, 0xc1, 0xc1};  // 0xc1: never used in msgpack
  ASSERT_EQ(::write(sv[0], bad, sizeof bad), static_cast<ssize_t>(sizeof bad));
  EXPECT_FALSE(read_message(sv[1]));
  const std::uint8_t truncated[] = {10, 0, 0, 0, 1};
  ASSERT_EQ(::write(sv[0], truncated, sizeof truncated), static_cast<ssize_t>(sizeof truncated));
  ::close(sv[0]);
  EXPECT_FALSE(read_message(sv[1]));
  ::close(sv[1]);
}

}  // namespace
}  // namespace fp4serve::engine::ipc
