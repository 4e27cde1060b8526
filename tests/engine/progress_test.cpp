// Progress reporting driven by a fake clock.
#include "engine/progress.h"

#include <gtest/gtest.h>

#include <deque>
#include <memory>

#include "engine/job/work_left.h"

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

// The job refreshes the ETA's input only when a line is about to be drawn.
TEST(Progress, OutputIsDueOnlyOnceTheIntervalHasPassedSinceTheLastLine) {
  Capture c;
  Progress p(10, c.options(false));  // a log line every 5 s
  EXPECT_FALSE(p.output_due());
  c.now += 4.9;
  EXPECT_FALSE(p.output_due());
  c.now += 0.2;
  EXPECT_TRUE(p.output_due());
  p.update();  // logs the line
  ASSERT_EQ(c.logs.size(), 1u);
  EXPECT_FALSE(p.output_due());
}

TEST(Progress, StatusLineShowsCountsAndRatesOverTheGenerationTime) {
  Capture c;
  Progress p(10, c.options(false));
  p.begin_startup();
  c.now += 6.0;  // the model load: in no rate
  p.end_startup(std::nullopt);
  p.begin_generation();
  c.now += 4.0;
  p.set_tokens(4000, 800);
  p.request_finished(true);
  p.request_finished(false);
  // No work left given: no ETA (requests done say nothing of the time the rest needs).
  EXPECT_EQ(p.status_line(),
            "2/10 requests (1 failed) | prefill 1000 tok/s | decode 200 tok/s | 0:04 elapsed");
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
  c.now += 0.5;  // a prefill step of 300 tokens
  p.set_tokens(300, 0);
  p.update();
  c.now += 1.0;  // decode steps: 150 tokens
  p.set_tokens(300, 150);
  p.update();
  p.add_output_tokens(80);
  p.add_output_tokens(73);
  p.request_finished(true);
  p.request_finished(true);
  p.request_finished(false);
  c.now += 0.25;  // after the last step: neither generation nor a step
  p.finish();
  ASSERT_EQ(c.logs.size(), 1u);
  EXPECT_EQ(c.logs[0],
            "done: requests: 2 ok, 1 failed | tokens: 300 prefill, 150 decode, 153 output | "
            "generation 0:02 (1.5 s) | throughput: 102 output tok/s, 1.3 req/s | prefill steps "
            "600 tok/s, decode steps 150 tok/s | wall 0:02 (1.8 s)");
}

// Issue 30: a 60,000-token prompt prefilled in 2.7 s after a 2.4 s start-up read
// "elapsed 0:05 (5.1 s) | 11802 prefill tok/s"; start-up now has its own line and only the
// wall time counts it.
TEST(Progress, StartUpIsReportedOnItsOwnLineAndKeptOutOfTheRates) {
  Capture c;
  ProgressOptions o = c.options(false);
  o.run_start = c.now - 0.1;  // the requests were read and validated first
  Progress p(1, o);
  p.begin_startup();
  c.now += 2.4;
  p.end_startup(StartupTiming{1.9, 0.3, 0.2, 0.0});
  ASSERT_EQ(c.logs.size(), 1u);
  EXPECT_EQ(c.logs[0], "start-up 2.4 s: load 1.9 s, warm-up 0.3 s, graph capture 0.2 s");
  p.begin_generation();
  c.now += 2.7;
  p.set_tokens(60000, 0);
  p.add_output_tokens(1);
  p.request_finished(true);
  p.update();
  p.finish();
  ASSERT_EQ(c.logs.size(), 2u);
  EXPECT_EQ(c.logs[1],
            "done: requests: 1 ok, 0 failed | tokens: 60000 prefill, 0 decode, 1 output | "
            "generation 0:03 (2.7 s) | throughput: 0 output tok/s, 0.4 req/s | prefill steps "
            "22222 tok/s, decode steps 0 tok/s | wall 0:05 (5.2 s) incl. start-up 2.4 s");
}

TEST(Progress, StartUpLineNamesNcclSetUpUnderTensorParallelism) {
  Capture c;
  Progress p(1, c.options(false));
  p.begin_startup();
  c.now += 3.0;
  p.end_startup(StartupTiming{1.5, 0.6, 0.4, 0.5});
  EXPECT_EQ(c.logs.at(0),
            "start-up 3.0 s: load 1.5 s, warm-up 0.6 s, graph capture 0.4 s, NCCL set-up 0.5 s");
  p.end_startup(std::nullopt);  // an executor that does not time its parts
  EXPECT_EQ(c.logs.at(1), "start-up 3.0 s");
}

// A mixed chunked step (prompt tokens and decodes) is a prefill step, as nanovllm-bench
// counts it: its time and decode tokens stay out of the decode steps' rate.
TEST(Progress, StepsAreTimedAsNanovllmBenchClassifiesThem) {
  Capture c;
  Progress p(1, c.options(false));
  c.now += 1.0;
  p.set_tokens(1000, 0);  // pure prefill
  p.update();
  c.now += 1.0;
  p.set_tokens(1500, 8);  // mixed: prefill
  p.update();
  c.now += 0.5;
  p.set_tokens(1500, 16);  // decode
  p.update();
  c.now += 0.5;
  p.set_tokens(1500, 24);  // decode
  p.update();
  p.update();  // no step ran: nothing timed
  const std::string s = p.summary();
  EXPECT_NE(s.find("prefill steps 750 tok/s, decode steps 16 tok/s"), std::string::npos) << s;
  EXPECT_NE(s.find("generation 0:03 (3.0 s)"), std::string::npos) << s;
}

// ETA: prompt tokens left at the prefill steps' rate, plus decode steps left (output left over
// the batch, or the longest output left if more) at the recent decode step time.
struct EtaRun {
  Capture c;
  Progress p{16, c.options(false)};
  int64_t prefill = 0, decode = 0;
  void prefill_step(int64_t tokens, double seconds) {
    c.now += seconds;
    prefill += tokens;
    p.set_tokens(prefill, decode);
    p.update();
  }
  void decode_step(int64_t batch, double seconds) {
    c.now += seconds;
    decode += batch;
    p.set_tokens(prefill, decode);
    p.update();
  }
};

TEST(Progress, EtaIsShownOnlyOnceTheRatesAreMeasured) {
  EtaRun r;
  r.p.set_work_left(WorkLeft{1000, 400, 100});
  EXPECT_FALSE(r.p.eta());  // nothing measured yet
  r.prefill_step(2000, 1.0);
  r.p.set_work_left(WorkLeft{0, 400, 100});
  r.decode_step(4, 0.1);
  r.decode_step(4, 0.1);
  EXPECT_FALSE(r.p.eta()) << "two decode steps are not a rate yet";
  EXPECT_EQ(r.p.status_line().find("ETA"), std::string::npos) << r.p.status_line();
  r.decode_step(4, 0.1);
  ASSERT_TRUE(r.p.eta());
  // max(400 / 4, 100) = 100 decode steps of 0.1 s.
  EXPECT_NEAR(*r.p.eta(), 10.0, 1e-9);
  // Outputs may end before max_tokens, and smaller batches step no slower: an upper bound.
  EXPECT_NE(r.p.status_line().find(" | ETA ~0:10"), std::string::npos) << r.p.status_line();
  r.p.set_work_left(WorkLeft{0, 0, 0});
  EXPECT_NE(r.p.status_line().find(" | ETA 0:00"), std::string::npos) << r.p.status_line();
}

TEST(Progress, EtaAddsPromptTokensLeftAtThePrefillRate) {
  EtaRun r;
  r.prefill_step(4000, 2.0);  // 2000 prompt tok/s
  for (int i = 0; i < 3; ++i) r.decode_step(8, 0.05);
  r.p.set_work_left(WorkLeft{6000, 80, 10});
  // 6000 / 2000 = 3 s, then max(80 / 8, 10) = 10 steps of 0.05 s.
  ASSERT_TRUE(r.p.eta());
  EXPECT_NEAR(*r.p.eta(), 3.5, 1e-9);
  // Prompt tokens left but no prefill step measured yet: no ETA.
  EtaRun fresh;
  for (int i = 0; i < 3; ++i) fresh.decode_step(8, 0.05);
  fresh.p.set_work_left(WorkLeft{6000, 80, 10});
  EXPECT_FALSE(fresh.p.eta());
}

// Issue 30's demo: "15/16 requests ... ETA 0:02-0:04" for about 40 s, the last request
// decoding alone. The longest output left bounds the steps, and the recent decode steps
// (one sequence, faster each) set their time.
TEST(Progress, EtaAtTheTailFollowsTheLongestOutputLeft) {
  EtaRun r;
  r.prefill_step(16 * 100, 0.5);
  for (int i = 0; i < 20; ++i) r.decode_step(16, 0.05);
  for (int i = 0; i < 15; ++i) r.p.request_finished(true);
  for (int i = 0; i < 40; ++i) r.decode_step(1, 0.04);  // the last one, alone
  // 1000 tokens left on that one sequence: 1000 steps of ~0.04 s, not a few seconds.
  r.p.set_work_left(WorkLeft{0, 1000, 1000});
  ASSERT_TRUE(r.p.eta());
  EXPECT_NEAR(*r.p.eta(), 40.0, 0.1);
  EXPECT_NE(r.p.status_line().find("15/16 requests"), std::string::npos);
  EXPECT_NE(r.p.status_line().find("ETA ~0:40"), std::string::npos) << r.p.status_line();
}

// On the CPU backend a decode step costs about per token: once the batch has varied, the
// tail is timed at its own batch, not at the full batch's step time.
TEST(Progress, EtaSplitsTheStepTimeOnceTheBatchHasVaried) {
  EtaRun r;
  r.prefill_step(1600, 0.5);
  for (int i = 0; i < 10; ++i) r.decode_step(16, 0.16);
  r.p.set_work_left(WorkLeft{0, 200, 150});
  // One batch size seen: nothing tells a step's fixed cost from its per-token cost, so the
  // longest output's 150 steps at the full batch's 0.16 s (the bound).
  ASSERT_TRUE(r.p.eta());
  EXPECT_NEAR(*r.p.eta(), 24.0, 1e-6);
  for (int i = 0; i < 10; ++i) r.decode_step(8, 0.08);
  // 0.01 s per token and nothing per step: 200 tokens left take 2 s, however they batch.
  ASSERT_TRUE(r.p.eta());
  EXPECT_NEAR(*r.p.eta(), 2.0, 1e-6);
}

TEST(WorkLeftTracker, CountsPromptAndOutputBudgetsLessWhatTheEngineDid) {
  WorkLeftTracker t(/*max_model_len=*/100);
  SamplingParams p;
  p.max_tokens = 30;
  // max_tokens bounds an output, and so does what max_model_len leaves after the prompt.
  EXPECT_EQ(t.add(/*prompt_tokens=*/40, p, /*num_seqs=*/2), 30);
  EXPECT_EQ(t.add(/*prompt_tokens=*/90, p, /*num_seqs=*/1), 10);
  EngineStats stats;
  std::deque<Sequence*> running;
  WorkLeft w = t.left(stats, running);
  EXPECT_EQ(w.prompt_tokens, 40 * 2 + 90);
  EXPECT_EQ(w.output_tokens, 30 * 2 + 10);

  // The first two sequences prefilled (one from the cache) and generated 5 and 7 tokens.
  stats.num_prefill_tokens = 40 + 8;
  stats.num_cached_tokens = 32;
  std::vector<std::unique_ptr<Sequence>> seqs;
  for (int done : {5, 7}) {
    seqs.push_back(std::make_unique<Sequence>(static_cast<int64_t>(seqs.size()),
                                              std::vector<int32_t>(40, 1), p, 16));
    for (int i = 0; i < done; ++i) seqs.back()->token_ids.push_back(2);
    running.push_back(seqs.back().get());
  }
  w = t.left(stats, running);
  EXPECT_EQ(w.prompt_tokens, 90);
  EXPECT_EQ(w.output_tokens, 70 - 12);
  EXPECT_EQ(w.longest_output, 30 - 5);

  // The second finished early: its unused budget is no longer work.
  running.pop_back();
  t.finished(30);
  w = t.left(stats, running);
  EXPECT_EQ(w.output_tokens, 25 + 10);
  EXPECT_EQ(w.longest_output, 25);
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
