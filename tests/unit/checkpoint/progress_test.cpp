// ByteProgress: the line formats, the log-line throttling (every 10 % or 5 s), exactly one final
// line, and counting from several threads at once.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "checkpoint/progress.h"

namespace fp4serve {
namespace {

TEST(ByteProgress, FormatsABarWithGigabytesRateAndEta) {
  const std::string line = ByteProgress::format_line("synth", 1'230'000'000, 3'400'000'000, 1.0, true, 10);
  EXPECT_EQ(line, "synth [###-------] 1.23/3.40 GB  1.23 GB/s  ETA 2s");
  EXPECT_EQ(ByteProgress::format_line("load", 3'400'000'000, 3'400'000'000, 4.0, true, 4),
            "load [####] 3.40/3.40 GB  0.85 GB/s  ETA 0s");
}

TEST(ByteProgress, FormatsALogLineWithPercent) {
  EXPECT_EQ(ByteProgress::format_line("load", 500'000'000, 1'000'000'000, 2.0, false),
            "load: 0.50/1.00 GB (50%)  0.25 GB/s  ETA 2s");
  EXPECT_EQ(ByteProgress::format_line("load", 0, 1'000'000'000, 0.0, false), "load: 0.00/1.00 GB (0%)  0.00 GB/s  ETA ?");
  // Hardly any bytes yet: no absurd estimate.
  EXPECT_EQ(ByteProgress::format_line("synth", 1000, 3'000'000'000, 60.0, false),
            "synth: 0.00/3.00 GB (0%)  0.00 GB/s  ETA ?");
}

TEST(ByteProgress, FormatsDurations) {
  EXPECT_EQ(ByteProgress::format_duration(3.2), "3s");
  EXPECT_EQ(ByteProgress::format_duration(65), "1m05s");
  EXPECT_EQ(ByteProgress::format_duration(7385), "2h03m");
}

TEST(ByteProgress, LogLinesComeEveryTenPercentAndOneFinalLine) {
  std::vector<std::string> lines;
  {
    ByteProgress p("load", 1000, ByteProgress::Mode::kLines, [&](std::string_view s) { lines.emplace_back(s); });
    for (int i = 0; i < 100; ++i) p.add(10);
    EXPECT_EQ(p.done(), 1000u);
    p.finish();
    p.finish();  // once only
  }  // nor again from the destructor
  ASSERT_EQ(lines.size(), 11u);  // 10 % steps + the final line
  EXPECT_EQ(lines[0].rfind("load: ", 0), 0u);
  EXPECT_NE(lines.back().find(" in "), std::string::npos) << lines.back();
}

TEST(ByteProgress, BarRedrawsInPlaceAndEndsWithANewline) {
  std::vector<std::string> out;
  {
    ByteProgress p("synth", 100, ByteProgress::Mode::kBar, [&](std::string_view s) { out.emplace_back(s); });
    p.add(100);
  }  // the destructor finishes
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out.back().front(), '\r');
  EXPECT_EQ(out.back().back(), '\n');
  EXPECT_NE(out.back().find("[##############################]"), std::string::npos) << out.back();
}

TEST(ByteProgress, OffPrintsNothingButCounts) {
  int calls = 0;
  ByteProgress p("x", 10, ByteProgress::Mode::kOff, [&](std::string_view) { ++calls; });
  p.add(4);
  p.add(6);
  p.finish();
  EXPECT_EQ(p.done(), 10u);
  EXPECT_EQ(calls, 0);
  ByteProgress disabled("y", 10, /*enabled=*/false);
  EXPECT_EQ(disabled.mode(), ByteProgress::Mode::kOff);
}

TEST(ByteProgress, CountsFromManyThreads) {
  ByteProgress p("x", 4'000'000, ByteProgress::Mode::kLines, [](std::string_view) {});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100'000; ++i) p.add(10);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(p.done(), 4'000'000u);
}

}  // namespace
}  // namespace fp4serve
