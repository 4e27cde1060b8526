#include "bench/nanovllm_bench_replicas.h"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/nanovllm_bench_barrier.h"
#include "bench/nanovllm_bench_body.h"
#include "bench/nanovllm_bench_merge.h"
#include "launcher/rank_processes.h"
#include "launcher/usage_error.h"

namespace nanovllm::bench {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// What run_replica_groups runs: the same benchmark body in every replica's rank 0. The
// launcher's own hooks (the segment, the ticks, the summary) have nothing to do here: the
// replicas share only the barrier, and each writes its own file.
class BenchReplicasJob : public ReplicaGroupsJob {
 public:
  BenchReplicasJob(const BenchOptions& o, const RunSettings& s, const fs::path& json_path,
                   ReplicaBarrier& barrier)
      : o_(o), s_(s), json_path_(json_path), barrier_(barrier) {}

  int replicas() const override { return s_.replicas; }
  void attach(const RunSegment&) override {}
  int rank0_main(int replica, const ExecutorFactory& load_model) override {
    return run_bench_body(o_, s_, replica_json_path(json_path_, replica), load_model,
                          ReplicaRole{replica, s_.replicas, &barrier_});
  }
  void on_tick() override {}
  void on_end() override {}
  std::optional<InterruptedJob> kept_results() const override { return std::nullopt; }

 private:
  const BenchOptions& o_;
  const RunSettings& s_;
  fs::path json_path_;
  ReplicaBarrier& barrier_;
};

json read_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str());
}

void remove_replica_files(const fs::path& json_path, int replicas) {
  std::error_code ec;
  for (int d = 0; d < replicas; ++d) fs::remove(replica_json_path(json_path, d), ec);
}

}  // namespace

fs::path replica_json_path(const fs::path& merged, int replica) {
  return merged.string() + ".replica" + std::to_string(replica);
}

int run_bench_replicas(const BenchOptions& o, const RunSettings& s, const fs::path& json_path) {
  const int replicas = s.replicas;
  spdlog::info(
      "data parallelism: {} replicas of {} rank(s) each; every replica runs the whole workload "
      "(work x{}), each timed run starting together",
      replicas, s.tp_size, replicas);
  int rc = 1;
  try {
    ReplicaBarrier barrier(replicas);  // mapped before run_replica_groups forks the ranks
    BenchReplicasJob job(o, s, json_path, barrier);
    rc = run_replica_groups(s, o.log_level, job);
  } catch (const UsageError& e) {  // too few GPUs for the replicas
    std::fprintf(stderr, "nanovllm-bench: %s\n", e.what());
    remove_replica_files(json_path, replicas);
    return kExitUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nanovllm-bench: %s\n", e.what());
    remove_replica_files(json_path, replicas);
    return 1;
  }
  if (rc != 0) {
    remove_replica_files(json_path, replicas);
    return rc;
  }
  try {
    std::vector<json> results;
    for (int d = 0; d < replicas; ++d)
      results.push_back(read_json(replica_json_path(json_path, d)));
    const fs::path tmp = json_path.string() + ".part";
    {
      std::ofstream out(tmp);
      out << merge_replica_results(results).dump(2) << "\n";
      if (!out) throw std::runtime_error("cannot write " + tmp.string());
    }
    fs::rename(tmp, json_path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nanovllm-bench: merging the replicas' results: %s\n", e.what());
    rc = 1;
  }
  remove_replica_files(json_path, replicas);
  return rc;
}

}  // namespace nanovllm::bench
