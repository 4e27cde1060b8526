// What the launcher's run drivers (launcher/rank_processes.cpp for one process or one group,
// launcher/rank_groups.cpp for replicas of groups) share: loading a rank's model runner from
// the run's settings, and the closing line of a run a stop signal ended.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>

#include "engine/job/interrupt.h"
#include "launcher/nccl_group.h"
#include "launcher/run_settings.h"
#include "rank/model_runner.h"

namespace nanovllm {

inline constexpr const char* kLaunchProgram = "nanovllm-launch";

// `nccl`: rank 0 under --tp on CUDA, for its start-up timing (null elsewhere).
std::unique_ptr<ModelRunner> load_model_runner(const RunSettings& s, Communicator& comm,
                                               const NcclRank* nccl = nullptr);

// Elements of the shared-memory all-reduce's staging area: collectives on larger tensors run
// in chunks of it.
size_t comm_elems(const RunSettings& s);

// Prints "nanovllm-launch: interrupted by ..." with what the job kept; returns 128 + sig.
int announce_interruption(int sig, const std::optional<InterruptedJob>& job);

}  // namespace nanovllm
