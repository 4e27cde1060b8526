// Named segments: unique names, create_only with mode 0600, and the stale-segment sweep that
// removes a dead launcher's segment but never a live one's.
#include "ipc/shm_segment.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "ipc/ipc_error.h"

namespace nanovllm {
namespace {

bool exists_in_dev_shm(const std::string& name) {
  struct stat st {};
  return ::stat(("/dev/shm/" + name).c_str(), &st) == 0;
}

pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int st = 0;
  ::waitpid(pid, &st, 0);  // reaped: the pid names no process now
  return pid;
}

TEST(ShmSegment, NameEmbedsOurPidAndDiffersEachTime) {
  const std::string a = make_segment_name("nvtest-seg");
  const std::string b = make_segment_name("nvtest-seg");
  EXPECT_NE(a, b);
  EXPECT_EQ(segment_owner_pid(a, "nvtest-seg"), ::getpid());
  EXPECT_EQ(segment_owner_pid("nvtest-seg-12-zz", "nvtest-seg"), -1);
  EXPECT_EQ(segment_owner_pid("nvtest-segx-12-ab", "nvtest-seg"), -1);
  EXPECT_EQ(segment_owner_pid("nvtest-seg-12-ab", "nvtest-seg"), 12);
}

TEST(ShmSegment, CreateIsOwnerOnlyZeroedAndSharedWithOpen) {
  const std::string name = make_segment_name("nvtest-seg");
  ShmSegment seg = ShmSegment::create(name, 4096);
  struct stat st {};
  ASSERT_EQ(::stat(("/dev/shm/" + name).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_GE(seg.size(), 4096u);
  EXPECT_EQ(static_cast<unsigned char*>(seg.data())[100], 0);
  std::memcpy(seg.data(), "hello", 6);
  ShmSegment again = ShmSegment::open(name);
  EXPECT_STREQ(static_cast<const char*>(again.data()), "hello");
  EXPECT_TRUE(ShmSegment::remove(name));
  EXPECT_FALSE(exists_in_dev_shm(name));
}

TEST(ShmSegment, CreateRefusesAnExistingNameWithAClearError) {
  const std::string name = make_segment_name("nvtest-seg");
  ShmSegment seg = ShmSegment::create(name, 64);
  try {
    ShmSegment::create(name, 64);
    ADD_FAILURE() << "create_only accepted an existing name";
  } catch (const IpcError& e) {
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
  }
  ShmSegment::remove(name);
}

TEST(ShmSegment, SweepRemovesADeadLaunchersSegmentAndKeepsLiveOnes) {
  const std::string stale = "nvtest-sweep-" + std::to_string(dead_pid()) + "-00ff00ff00ff00ff";
  const std::string live = make_segment_name("nvtest-sweep");  // our own pid: alive
  const std::string other = "nvtest-sweeper-" + std::to_string(dead_pid()) + "-ab";  // not ours
  ShmSegment::create(stale, 64);
  ShmSegment::create(live, 64);
  ShmSegment::create(other, 64);
  const auto removed = sweep_stale_segments("nvtest-sweep");
  EXPECT_EQ(removed, std::vector<std::string>{stale});
  EXPECT_FALSE(exists_in_dev_shm(stale));
  EXPECT_TRUE(exists_in_dev_shm(live));
  EXPECT_TRUE(exists_in_dev_shm(other));
  ShmSegment::remove(live);
  ShmSegment::remove(other);
}

}  // namespace
}  // namespace nanovllm
