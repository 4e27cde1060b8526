// One steady decode step measured on its own (CUDA only): `batch` sequences with about
// `context` tokens of context each, three passes on fresh engines over the same executor:
//   1. greedy (temperature 0), the normal path (decode graphs unless --enforce-eager);
//   2. the model's default sampling (generation_config.json), the normal path;
//   3. the model's default sampling again with the phase timer on (eager, so that events can
//      be recorded between the kernels).
// Step timing (CUDA events) is on in all three. Per decode step of each pass: the wall time
// of engine.step(), the executor's StepTiming and, in pass 3, the phase times; the medians
// over the measured steps (a few warm-up steps skipped) make the figures:
//   step_ms = pass 2's wall time; sampling cost = (pass 2 - pass 1) / pass 2;
//   host share = GPU idle between steps / (GPU busy + idle), from pass 2's events;
//   phases_ms = pass 3's phase times, plus "host" = pass 2's idle time.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>

#include "bench/limit_model.h"
#include "bench/step_recorder.h"
#include "engine/engine_config.h"
#include "engine/request.h"
#include "kernels/tensor.h"

namespace nanovllm::bench {

struct DecodeStepSetup {
  int batch = 256;     // capped by max_num_seqs
  int context = 1024;  // capped so that prompt + output fit max_model_len
  int64_t vocab_size = 0;
  SamplingOverrides model_defaults;  // generation_config.json (empty: temperature 1)
  // The phase timer's clock: CUDA events, or the host clock (tests drive it on the CPU).
  Device device = Device::kCuda;
};

// The JSON "decode_step" object (bench/README.md); null when no step ran at the full batch
// (the KV cache could not hold it: the engine preempted). Throws on a CUDA failure.
nlohmann::json measure_decode_step(StepRecorder& executor, const EngineConfig& engine,
                                   const DecodeStepSetup& setup,
                                   const std::optional<LimitSetup>& limit);

}  // namespace nanovllm::bench
