#include "engine/request.h"

#include <gtest/gtest.h>

#include "engine/engine_error.h"

namespace fp4serve::engine {
namespace {

TEST(Request, TokensAndCounts) {
  Request r("a", {1, 2, 3}, 5, 7);
  EXPECT_EQ(r.id(), "a");
  EXPECT_EQ(r.arrival_seq(), 7u);
  EXPECT_EQ(r.num_prompt_tokens(), 3);
  EXPECT_EQ(r.num_output_tokens(), 0);
  r.append_output_token(9);
  r.append_output_token(8);
  EXPECT_EQ(r.num_tokens(), 5);
  EXPECT_EQ(r.num_output_tokens(), 2);
  ASSERT_EQ(r.output_token_ids().size(), 2u);
  EXPECT_EQ(r.output_token_ids()[0], 9);
  EXPECT_EQ(r.all_token_ids()[3], 9);
  EXPECT_EQ(r.prompt_token_ids().size(), 3u);
}

TEST(Request, RejectsEmptyPromptAndZeroMaxTokens) {
  EXPECT_THROW(Request("a", {}, 5, 0), EngineLogicError);
  EXPECT_THROW(Request("a", {1}, 0, 0), EngineLogicError);
}

TEST(Request, ValidLifecycles) {
  Request r("a", {1}, 5, 0);
  EXPECT_EQ(r.status(), RequestStatus::kWaiting);
  r.transition_to(RequestStatus::kRunning);
  r.transition_to(RequestStatus::kPreempted);
  r.transition_to(RequestStatus::kRunning);
  r.transition_to(RequestStatus::kFinishedLength);
  EXPECT_TRUE(r.finished());
  EXPECT_STREQ(finish_reason(r.status()), "length");

  Request w("w", {1}, 5, 0);
  w.transition_to(RequestStatus::kFinishedAborted);
  EXPECT_STREQ(finish_reason(w.status()), "abort");
  Request p("p", {1}, 5, 0);
  p.transition_to(RequestStatus::kRunning);
  p.transition_to(RequestStatus::kPreempted);
  p.transition_to(RequestStatus::kFinishedAborted);
  EXPECT_TRUE(p.finished());
}

TEST(Request, InvalidTransitionsThrowNamingTheRequest) {
  Request r("req-42", {1}, 5, 0);
  // A waiting request can neither finish by itself nor be preempted.
  EXPECT_THROW(r.transition_to(RequestStatus::kFinishedStopped), EngineLogicError);
  EXPECT_THROW(r.transition_to(RequestStatus::kPreempted), EngineLogicError);
  r.transition_to(RequestStatus::kRunning);
  EXPECT_THROW(r.transition_to(RequestStatus::kWaiting), EngineLogicError);
  r.transition_to(RequestStatus::kFinishedStopped);
  try {
    r.transition_to(RequestStatus::kRunning);
    FAIL() << "finished is terminal";
  } catch (const EngineLogicError& e) {
    EXPECT_NE(std::string(e.what()).find("req-42"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("finished_stopped -> running"), std::string::npos);
  }
  EXPECT_THROW(r.transition_to(RequestStatus::kFinishedAborted), EngineLogicError);
}

TEST(Request, TransitionTableIsExactlyTheDocumentedOne) {
  using S = RequestStatus;
  const S all[] = {S::kWaiting, S::kRunning, S::kPreempted, S::kFinishedStopped, S::kFinishedLength,
                   S::kFinishedAborted};
  int valid = 0;
  for (S a : all)
    for (S b : all) valid += is_valid_transition(a, b) ? 1 : 0;
  // waiting->{running,aborted}, preempted->{running,aborted}, running->{preempted,3 finished}.
  EXPECT_EQ(valid, 8);
}

}  // namespace
}  // namespace fp4serve::engine
