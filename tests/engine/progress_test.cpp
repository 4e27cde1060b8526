// Progress reporting driven by a fake clock.
#include "engine/progress.h"

#include <gtest/gtest.h>

namespace nanovllm {
namespace {

struct Capture {
  double now = 100.0;  // an arbitrary start: only differences matter
  std::vector<std::string> live;
  std::vector<std::string> logs;

  ProgressOptions options(bool live_mode) {
    ProgressOptions o;
    o.live = live_mode;
    o.clock = [this] { return now; };
    o.write_live = [this](std::string_view s) { live.emplace_back(s); };
    o.log = [this](const std::string& s) { logs.push_back(s); };
    o.bar_width = 10;
    return o;
  }
};

TEST(Progress, DurationsAreMinutesSecondsOrHours) {
  EXPECT_EQ(format_duration(0), "0:00");
  EXPECT_EQ(format_duration(7.4), "0:07");
  EXPECT_EQ(format_duration(754), "12:34");
  EXPECT_EQ(format_duration(3723), "1:02:03");
}

TEST(Progress, StatusLineShowsCountsRatesAndEta) {
  Capture c;
  Progress p(10, c.options(false));
  EXPECT_NE(p.status_line().find("ETA ?"), std::string::npos) << p.status_line();
  c.now += 4.0;
  p.set_tokens(4000, 800);
  p.request_finished(true);
  p.request_finished(false);
  // 2 of 10 done in 4 s: 8 left at 2 s each = 16 s.
  EXPECT_EQ(p.status_line(),
            "2/10 requests (1 failed) | prefill 1000 tok/s | decode 200 tok/s | 0:04 elapsed | "
            "ETA 0:16");
}

TEST(Progress, BarFillsWithTheShareOfRequestsDone) {
  Capture c;
  Progress p(4, c.options(true));
  EXPECT_EQ(p.bar_line().substr(0, 13), "[----------] ");
  p.request_finished(true);
  p.request_finished(true);
  EXPECT_EQ(p.bar_line().substr(0, 13), "[#####-----] ");
  p.request_finished(true);
  p.request_finished(true);
  EXPECT_EQ(p.bar_line().substr(0, 13), "[##########] ");
}

TEST(Progress, LiveModeRedrawsOneLineInPlaceAtMostEveryTenthOfASecond) {
  Capture c;
  Progress p(3, c.options(true));
  p.update();  // no time has passed
  EXPECT_TRUE(c.live.empty());
  c.now += 0.2;
  p.update();
  c.now += 0.05;
  p.update();  // too soon after the last redraw
  ASSERT_EQ(c.live.size(), 1u);
  EXPECT_EQ(c.live[0].front(), '\r');
  EXPECT_EQ(c.live[0].find('\n'), std::string::npos);
  EXPECT_TRUE(c.logs.empty());
  p.finish();
  ASSERT_EQ(c.live.size(), 2u);
  EXPECT_EQ(c.live[1], "\r\x1b[K");  // the bar is erased before the summary
  ASSERT_EQ(c.logs.size(), 1u);
}

TEST(Progress, LogModeWritesALineEveryFiveSeconds) {
  Capture c;
  Progress p(3, c.options(false));
  for (int i = 0; i < 24; ++i) {  // 12 s in half-second steps
    c.now += 0.5;
    p.update();
  }
  ASSERT_EQ(c.logs.size(), 2u);  // at 5 s and 10 s
  EXPECT_EQ(c.logs[0].rfind("progress: 0/3 requests", 0), 0u) << c.logs[0];
  EXPECT_TRUE(c.live.empty());
}

TEST(Progress, SummaryTotalsRequestsTokensAndThroughput) {
  Capture c;
  Progress p(3, c.options(false));
  p.set_tokens(300, 150);
  p.request_finished(true);
  p.request_finished(true);
  p.request_finished(false);
  c.now += 1.5;
  p.finish();
  ASSERT_EQ(c.logs.size(), 1u);
  EXPECT_EQ(c.logs[0],
            "done: requests: 2 ok, 1 failed | tokens: 300 prefill, 150 decode | elapsed 0:02 "
            "(1.5 s) | throughput: 200 prefill tok/s, 100 decode tok/s, 2.0 req/s");
}

TEST(Progress, EmptyRunReportsWithoutDividingByZero) {
  Capture c;
  Progress p(0, c.options(false));
  EXPECT_EQ(p.bar_line().substr(0, 13), "[##########] ");
  p.finish();
  EXPECT_NE(c.logs.at(0).find("0 ok, 0 failed"), std::string::npos);
}

}  // namespace
}  // namespace nanovllm
