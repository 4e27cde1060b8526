// CollectiveWatchdog with fake queries on the CPU: work that never completes ends when the
// stop predicate fires or the communicator reports an error (aborted once, rank and reason in
// the message); completed work returns without an abort; a timeout ends a silent hang.
#include "rank/collective_watchdog.h"

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>

#include "kernels/check.h"

namespace nanovllm {
namespace {

using namespace std::chrono_literals;

// A communicator that counts its aborts and reports `error` once `error_after` queries passed.
struct FakeComm {
  int aborts = 0;
  int queries = 0;
  int error_after = -1;  // -1: never
  std::string error = "remote process exited or there was a network error";

  CollectiveProbe probe() {
    return CollectiveProbe{
        [this] { return error_after >= 0 && queries++ >= error_after ? error : std::string(); },
        [this] { ++aborts; }};
  }
};

const WatchdogPolicy kFast{.spin = 200us, .max_sleep = 200us, .stop_interval = 1ms};

std::string failure_of(CollectiveWatchdog& dog, const std::function<bool()>& done,
                       const std::string& what) {
  try {
    dog.wait_until(done, what);
  } catch (const CollectiveError& e) {
    return e.what();
  }
  return "";
}

TEST(CollectiveWatchdog, StopPredicateEndsAWaitThatNeverCompletes) {
  FakeComm comm;
  int stop_calls = 0;
  CollectiveWatchdog dog(
      3, comm.probe(), [&] { return ++stop_calls >= 3; }, kFast);
  const std::string msg = failure_of(
      dog, [] { return false; }, "all_reduce_sum");
  EXPECT_EQ(comm.aborts, 1);
  EXPECT_EQ(stop_calls, 3);
  EXPECT_NE(msg.find("rank 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("all_reduce_sum"), std::string::npos) << msg;
  EXPECT_NE(msg.find("stop predicate fired"), std::string::npos) << msg;
  EXPECT_TRUE(dog.aborted());

  // The communicator is gone: the next wait fails at once, without a second abort.
  const std::string again = failure_of(
      dog, [] { return true; }, "gather_to_root");
  EXPECT_NE(again.find("aborted earlier"), std::string::npos) << again;
  EXPECT_EQ(comm.aborts, 1);
}

TEST(CollectiveWatchdog, ThrowingStopPredicateGivesItsMessageAsTheReason) {
  FakeComm comm;
  CollectiveWatchdog dog(
      1, comm.probe(), []() -> bool { throw std::runtime_error("the launcher (pid 42) is gone"); },
      kFast);
  const std::string msg = failure_of(
      dog, [] { return false; }, "warm-up");
  EXPECT_EQ(comm.aborts, 1);
  EXPECT_NE(msg.find("rank 1: warm-up aborted: the launcher (pid 42) is gone"), std::string::npos)
      << msg;
}

TEST(CollectiveWatchdog, AsyncErrorAbortsAndThrowsEvenWhenTheWorkEnded) {
  FakeComm comm;
  comm.error_after = 5;
  CollectiveWatchdog dog(
      2, comm.probe(), [] { return false; }, kFast);
  int polls = 0;
  const std::string msg = failure_of(
      dog, [&] { return ++polls > 5; }, "all_reduce_min");
  EXPECT_EQ(comm.aborts, 1);
  EXPECT_NE(msg.find("rank 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("network error"), std::string::npos) << msg;
}

TEST(CollectiveWatchdog, CompletionReturnsWithoutAbortOrStopCheckOnTheFastPath) {
  FakeComm comm;
  int stop_calls = 0;
  CollectiveWatchdog dog(
      0, comm.probe(), [&] { return ++stop_calls > 0; }, kFast);
  dog.wait_until([] { return true; }, "all_reduce_sum");  // done at the first query
  EXPECT_EQ(stop_calls, 0);

  // Done after a few polls, with a healthy stop predicate that is consulted on the way.
  CollectiveWatchdog slow(
      0, comm.probe(),
      [&] {
        ++stop_calls;
        return false;
      },
      kFast);
  const auto t0 = std::chrono::steady_clock::now();
  slow.wait_until([&] { return std::chrono::steady_clock::now() - t0 > 20ms; }, "gather");
  EXPECT_GT(stop_calls, 1);
  EXPECT_EQ(comm.aborts, 0);
  EXPECT_FALSE(slow.aborted());
}

TEST(CollectiveWatchdog, TimeoutEndsASilentHang) {
  FakeComm comm;
  WatchdogPolicy policy = kFast;
  policy.timeout = 30ms;
  CollectiveWatchdog dog(
      5, comm.probe(), [] { return false; }, policy);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string msg = failure_of(
      dog, [] { return false; }, "ncclCommInitRankConfig");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  EXPECT_EQ(comm.aborts, 1);
  EXPECT_NE(msg.find("rank 5: ncclCommInitRankConfig aborted: timed out after 30 ms"),
            std::string::npos)
      << msg;
}

TEST(CollectiveWatchdog, AbortIsIdempotentAndAProbeWithoutAbortIsABug) {
  FakeComm comm;
  CollectiveWatchdog dog(0, comm.probe(), {}, kFast);
  dog.abort();
  dog.abort();
  EXPECT_EQ(comm.aborts, 1);
  EXPECT_THROW(CollectiveWatchdog(0, CollectiveProbe{}, {}), CheckError);
}

}  // namespace
}  // namespace nanovllm
