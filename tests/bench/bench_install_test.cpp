// An installed nanovllm-bench finds its workload file (issue 30): `cmake --install --component
// bench` puts the binary in <prefix>/bin and bench/data/*.jsonl in
// <prefix>/share/nanovllm/bench/data, and the installed binary, run from an empty folder with
// the source tree out of reach ($NANOVLLM_BENCH_SOURCE_DIR pointing nowhere), runs the
// nanovllm workload from there. Without it the error names every place tried. Before, the
// binary looked only in the current directory and in the source tree's absolute path baked in
// at build time, and nothing was installed.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "bench/nanovllm_bench_data.h"
#include "tests/bench/bench_spawn.h"
#include "tests/launcher/launch_test_support.h"

namespace nanovllm::testing {
namespace {

using namespace std::chrono_literals;

const fs::path& prefix() {
  static const fs::path p = [] {
    const fs::path dir = work_dir() / "prefix";
    const std::string cmd = std::string("'") + CMAKE_COMMAND + "' --install '" + BUILD_DIR +
                            "' --prefix '" + dir.string() + "' --component bench > '" +
                            (work_dir() / "install.log").string() + "' 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << read_text(work_dir() / "install.log");
    return dir;
  }();
  return p;
}

struct InstalledRun {
  int exit_code = -1;
  std::string err;
  Json json;
};

// The installed binary from an empty folder, the source tree's path replaced by one that
// does not exist and no NANOVLLM_BENCH_DATA, on two requests of nanovllm-cpu.
InstalledRun run_installed(const std::string& tag) {
  const fs::path cwd = work_dir() / (tag + "-cwd"), json = work_dir() / (tag + ".json");
  fs::create_directories(cwd);
  BenchSpawn s;
  s.args = tiny_cpu_bench_args((prefix() / "bin" / "nanovllm-bench").string(),
                               tiny_model().string(), json.string(),
                               {"--workloads", "nanovllm-cpu", "--max-requests", "2",
                                "--token-scale", "0.02", "--runs", "1"});
  s.out = (work_dir() / (tag + ".out")).string();
  s.err = (work_dir() / (tag + ".err")).string();
  s.cwd = cwd.string();
  s.env = {{"NANOVLLM_BENCH_SOURCE_DIR", (work_dir() / "no-source-tree").string()},
           {"NANOVLLM_BENCH_DATA", std::nullopt},
           {"NANOVLLM_SHM_PREFIX", unique_prefix()}};
  const pid_t pid = spawn_bench(s);
  InstalledRun r;
  const std::optional<int> rc = wait_exit(pid, 120s);
  if (!rc) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  r.exit_code = rc.value_or(-1);
  r.err = read_text(s.err);
  if (fs::exists(json)) r.json = Json::parse(read_text(json));
  return r;
}

TEST(BenchInstall, InstalledBinaryFindsItsWorkloadWithoutTheSourceTree) {
  REQUIRE_TOKENIZER();
  const fs::path data = prefix() / "share/nanovllm/bench/data" / bench::kWorkloadFileName;
  ASSERT_TRUE(fs::is_regular_file(prefix() / "bin" / "nanovllm-bench"));
  ASSERT_TRUE(fs::is_regular_file(data));
  EXPECT_EQ(fs::file_size(data),
            fs::file_size(fs::path(NANOVLLM_SOURCE_DIR) / "bench/data" / bench::kWorkloadFileName));

  const InstalledRun found = run_installed("installed");
  ASSERT_EQ(found.exit_code, 0) << found.err;
  ASSERT_EQ(found.json["workloads"].size(), 1u) << found.err;
  EXPECT_EQ(found.json["workloads"][0]["name"], "nanovllm-cpu");
  EXPECT_EQ(found.json["workloads"][0]["num_requests"], 2);

  // Without the installed copy every place tried is named.
  const fs::path moved = work_dir() / "moved.jsonl";
  fs::rename(data, moved);
  const InstalledRun missing = run_installed("missing");
  fs::rename(moved, data);
  EXPECT_EQ(missing.exit_code, 2) << missing.err;
  const std::string file = std::string("/") + bench::kWorkloadFileName;
  for (const fs::path& place :
       {prefix() / "share/nanovllm/bench/data", work_dir() / "missing-cwd" / "bench/data",
        work_dir() / "no-source-tree" / "bench/data"})
    EXPECT_NE(missing.err.find(place.string() + file), std::string::npos)
        << place << " not named in\n"
        << missing.err;
}

TEST(BenchDataLookup, TheEnvironmentsFolderComesFirstThenBesideTheBinary) {
  ::setenv("NANOVLLM_BENCH_DATA", (work_dir() / "data-env").c_str(), 1);
  ::setenv("NANOVLLM_BENCH_SOURCE_DIR", "/nowhere", 1);
  const std::vector<fs::path> dirs = bench::bench_data_dirs();
  ::unsetenv("NANOVLLM_BENCH_DATA");
  ::unsetenv("NANOVLLM_BENCH_SOURCE_DIR");
  ASSERT_EQ(dirs.size(), 4u);
  EXPECT_EQ(dirs[0], work_dir() / "data-env");
  const fs::path exe = fs::read_symlink("/proc/self/exe");
  EXPECT_EQ(dirs[1], (exe.parent_path().parent_path() / "share/nanovllm/bench/data"));
  EXPECT_EQ(dirs[2], fs::current_path() / "bench/data");
  EXPECT_EQ(dirs[3], fs::path("/nowhere/bench/data"));

  fs::create_directories(work_dir() / "data-env");
  write_file("data-env/x.jsonl", "{}\n");
  ::setenv("NANOVLLM_BENCH_DATA", (work_dir() / "data-env").c_str(), 1);
  const bench::DataLookup found = bench::find_bench_data("x.jsonl");
  const bench::DataLookup none = bench::find_bench_data("nothing.jsonl");
  ::unsetenv("NANOVLLM_BENCH_DATA");
  ASSERT_TRUE(found.found);
  EXPECT_EQ(*found.found, work_dir() / "data-env/x.jsonl");
  EXPECT_EQ(found.tried.size(), 1u);
  EXPECT_FALSE(none.found);
  EXPECT_EQ(none.tried.size(), 4u);
  const std::string message = bench::data_not_found_message("nothing.jsonl", none);
  for (const fs::path& p : none.tried) EXPECT_NE(message.find(p.string()), std::string::npos);
}

}  // namespace
}  // namespace nanovllm::testing
