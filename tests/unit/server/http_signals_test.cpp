// TerminationSignals: SIGTERM/SIGINT reach wait() as values; cancel() ends it without a signal.
#include <gtest/gtest.h>

#include <csignal>
#include <thread>

#include "server/http/termination_signals.h"

namespace fp4serve::http {
namespace {

TEST(HttpTerminationSignals, DeliversSigterm) {
  TerminationSignals signals;
  std::thread sender([] { std::raise(SIGTERM); });
  sender.join();  // delivered before wait(): the signal_set keeps it
  EXPECT_EQ(signals.wait(), SIGTERM);
}

TEST(HttpTerminationSignals, DeliversSigintFromAnotherThread) {
  TerminationSignals signals;
  std::thread sender([] { std::raise(SIGINT); });
  EXPECT_EQ(signals.wait(), SIGINT);
  sender.join();
}

TEST(HttpTerminationSignals, CancelEndsWaitWithZero) {
  TerminationSignals signals;
  std::thread canceller([&] { signals.cancel(); });
  EXPECT_EQ(signals.wait(), 0);
  canceller.join();
}

}  // namespace
}  // namespace fp4serve::http
