// The front-end's supervisor bookkeeping: what is resubmitted after the engine process dies (each
// in-flight request with what its client was sent; cancelled ones not, finished ones gone), and the
// bounded restarts with back-off.
#include <gtest/gtest.h>

#include "engine/ipc/inflight_table.h"
#include "engine/ipc/restart_policy.h"

namespace fp4serve::engine::ipc {
namespace {

EngineRequest request(const std::string& id, int n = 1, int arrival_ms = 0) {
  EngineRequest r;
  r.id = id;
  r.prompt_token_ids = {1, 2, 3};
  r.params.n = n;
  r.arrival_time = std::chrono::steady_clock::time_point(std::chrono::milliseconds(arrival_ms));
  r.notifier = [] {};
  return r;
}

RequestOutput output(const std::string& id, int index, std::vector<std::int32_t> tokens, std::string text,
                     bool seq_finished = false, bool finished = false) {
  RequestOutput o;
  o.request_id = id;
  SequenceDelta d;
  d.index = index;
  d.token_ids = std::move(tokens);
  d.text = std::move(text);
  if (seq_finished) d.finish_reason = "stop";
  o.deltas.push_back(d);
  o.finished = finished;
  return o;
}

TEST(InflightTable, ResumesEachRequestWithTheTokensAndTextAlreadySent) {
  InflightTable t;
  auto ch = std::make_shared<OutputChannel>();
  t.add(request("b", 1, 20), ch);
  t.add(request("a", 1, 10), std::make_shared<OutputChannel>());
  EXPECT_EQ(t.record(output("b", 0, {7, 8}, "ab")), ch);
  EXPECT_EQ(t.record(output("b", 0, {9}, "")), ch);  // a held-back byte: no text yet
  EXPECT_EQ(t.record(output("zzz", 0, {1}, "x")), nullptr) << "unknown request";
  const std::vector<EngineRequest> r = t.resumable();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].id, "a") << "arrival order";
  EXPECT_TRUE(r[0].resumed.empty()) << "nothing sent yet: a fresh submission";
  EXPECT_EQ(r[1].id, "b");
  ASSERT_EQ(r[1].resumed.size(), 1u);
  EXPECT_EQ(r[1].resumed[0].token_ids, (std::vector<std::int32_t>{7, 8, 9}));
  EXPECT_EQ(r[1].resumed[0].text_bytes, 2u);
  EXPECT_EQ(r[1].prompt_token_ids, (std::vector<std::int32_t>{1, 2, 3})) << "the original prompt";
  EXPECT_FALSE(r[1].notifier) << "the notifier stays on the channel";
}

TEST(InflightTable, FinishedRequestsLeaveAndFinishedSequencesAreMarked) {
  InflightTable t;
  t.add(request("done"), std::make_shared<OutputChannel>());
  t.add(request("n2", 2), std::make_shared<OutputChannel>());
  t.record(output("done", 0, {1}, "x", true, true));
  t.record(output("n2", 1, {4, 5}, "yz", true));
  EXPECT_EQ(t.find("done"), nullptr);
  const std::vector<EngineRequest> r = t.resumable();
  ASSERT_EQ(r.size(), 1u);
  ASSERT_EQ(r[0].resumed.size(), 1u);
  EXPECT_EQ(r[0].resumed[0].index, 1);
  EXPECT_TRUE(r[0].resumed[0].finished);
}

TEST(InflightTable, CancelledRequestsAreNotResumedAndGetTheirFinalAbort) {
  InflightTable t;
  auto ch = std::make_shared<OutputChannel>();
  t.add(request("gone", 2), ch);
  t.add(request("live"), std::make_shared<OutputChannel>());
  t.record(output("gone", 0, {1}, "a", true));
  t.find("gone")->cancelled = true;
  const auto cancelled = t.take_cancelled();
  ASSERT_EQ(cancelled.size(), 1u);
  EXPECT_EQ(cancelled[0].first, ch);
  const RequestOutput& fin = cancelled[0].second;
  EXPECT_TRUE(fin.finished);
  ASSERT_EQ(fin.deltas.size(), 1u) << "only the unfinished sequence";
  EXPECT_EQ(fin.deltas[0].index, 1);
  EXPECT_EQ(fin.deltas[0].finish_reason, "abort");
  const auto r = t.resumable();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].id, "live");
}

TEST(InflightTable, TakeAllEndsEveryRequestWithTheError) {
  InflightTable t;
  t.add(request("a"), std::make_shared<OutputChannel>());
  const auto all = t.take_all("engine gone", false);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].second.error, "engine gone");
  EXPECT_EQ(t.size(), 0u);
}

TEST(RestartBudget, FirstRestartAtOnceThenDoublingBackOffThenGiveUp) {
  RestartPolicy p;
  p.max_restarts = 4;
  p.initial_backoff = std::chrono::milliseconds(100);
  p.max_backoff = std::chrono::milliseconds(250);
  RestartBudget b(p);
  auto t = std::chrono::steady_clock::time_point(std::chrono::seconds(1000));
  EXPECT_EQ(b.next(t), std::chrono::milliseconds(0));
  EXPECT_EQ(b.next(t), std::chrono::milliseconds(100));
  EXPECT_EQ(b.next(t), std::chrono::milliseconds(200));
  EXPECT_EQ(b.next(t), std::chrono::milliseconds(250)) << "capped";
  EXPECT_FALSE(b.next(t)) << "budget spent";
}

TEST(RestartBudget, AHealthyRunStartsTheCountAgain) {
  RestartPolicy p;
  p.max_restarts = 1;
  p.healthy_after = std::chrono::seconds(60);
  RestartBudget b(p);
  auto t = std::chrono::steady_clock::time_point(std::chrono::seconds(1000));
  EXPECT_TRUE(b.next(t));
  EXPECT_FALSE(b.next(t + std::chrono::seconds(10)));
  EXPECT_EQ(b.next(t + std::chrono::seconds(61)), std::chrono::milliseconds(0));
}

TEST(RestartBudget, ZeroMeansNeverRestart) {
  RestartPolicy p;
  p.max_restarts = 0;
  RestartBudget b(p);
  EXPECT_FALSE(b.next(std::chrono::steady_clock::now()));
}

}  // namespace
}  // namespace fp4serve::engine::ipc
