// The launcher's one progress line under data parallelism: totals summed over the replicas,
// requests nobody claimed counted from the shared claim counter (for the ETA and for the
// closing line of an interrupted run), result lines including the launcher's error lines,
// one start-up line once the first replica generates and one summary at the end.
#include "launcher/replica_progress.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace nanovllm {
namespace {

struct Fixture {
  double now = 100.0;
  std::vector<std::string> logs;
  PendingWork work;
  ReplicaTotals totals[2]{};
  std::atomic<int64_t> next_request{0};

  Fixture() {
    // Five requests: ids 0..4, the third failed validation; 10-token prompts, n = 1 except
    // request 1 (n = 2), 20 tokens each at most.
    for (int i = 0; i < 5; ++i) {
      Request r;
      r.id = std::to_string(i);
      r.prompt_token_ids.assign(10, 7);
      r.sampling_params.max_tokens = 20;
      r.sampling_params.n = i == 1 ? 2 : 1;
      if (i == 2) r.fail("bad", "prompt");
      work.requests.push_back(r);
    }
    work.written.resize(5);
  }
  ProgressOptions options() {
    ProgressOptions o;
    o.clock = [this] { return now; };
    o.log = [this](const std::string& s) { logs.push_back(s); };
    o.log_interval_s = 1e9;
    return o;
  }
  size_t logs_with(const std::string& needle) const {
    size_t k = 0;
    for (const std::string& l : logs) k += l.find(needle) != std::string::npos ? 1 : 0;
    return k;
  }
};

TEST(ReplicaProgress, UnclaimedRequestsAreTheValidOnesPastTheClaimCounter) {
  Fixture f;
  ReplicaProgress p(f.work, /*failed_validation=*/1, /*max_model_len=*/4096, f.options());
  p.attach({&f.totals[0], &f.totals[1]}, &f.next_request);
  EXPECT_EQ(p.unclaimed_requests(), 4);  // 0, 1, 3, 4
  f.next_request = 2;
  EXPECT_EQ(p.unclaimed_requests(), 2);  // 3, 4 (2 failed validation)
  f.next_request = 3;
  EXPECT_EQ(p.unclaimed_requests(), 2);
  f.next_request = 9;  // replicas overshoot the counter when they find it exhausted
  EXPECT_EQ(p.unclaimed_requests(), 0);
}

TEST(ReplicaProgress, LinesWrittenAddTheLaunchersErrorLinesToEveryReplicas) {
  Fixture f;
  ReplicaProgress p(f.work, 1, 4096, f.options());
  p.attach({&f.totals[0], &f.totals[1]}, &f.next_request);
  f.totals[0].lines_written = 2;
  f.totals[1].lines_written = 3;
  EXPECT_EQ(p.lines_written(), 6);
}

TEST(ReplicaProgress, StartUpEndsWithTheFirstGeneratingReplicaAndTheSummarySumsThemAll) {
  Fixture f;
  ReplicaProgress p(f.work, 1, 4096, f.options());
  p.attach({&f.totals[0], &f.totals[1]}, &f.next_request);
  f.now = 103.0;
  p.poll();
  EXPECT_EQ(f.logs_with("start-up"), 0u);  // nobody loaded yet
  f.totals[1].state = ReplicaTotals::kGenerating;
  p.poll();
  EXPECT_EQ(f.logs_with("start-up 3.0 s"), 1u);
  f.totals[0].state = ReplicaTotals::kGenerating;
  f.now = 104.0;
  f.totals[0].ok_requests = 2;
  f.totals[0].prefill_tokens = 20;
  f.totals[0].decode_tokens = 30;
  f.totals[0].output_tokens = 30;
  f.totals[1].ok_requests = 1;
  f.totals[1].failed_requests = 1;
  f.totals[1].prefill_tokens = 10;
  f.totals[1].decode_tokens = 10;
  f.totals[1].output_tokens = 10;
  p.poll();
  f.now = 105.0;
  p.finish();
  p.finish();  // once
  ASSERT_EQ(f.logs_with("done: "), 1u);
  EXPECT_EQ(f.logs_with("requests: 3 ok, 2 failed"), 1u);  // 1 + 1 failed: validation, engine
  EXPECT_EQ(f.logs_with("tokens: 30 prefill, 40 decode, 40 output"), 1u);
}

}  // namespace
}  // namespace nanovllm
