// LLMEngine's step (llm_engine.h): schedule a batch, launch its command, collect the sampled
// tokens, postprocess. With async scheduling the next decode step is scheduled and launched
// before this one's tokens are collected, its inputs pending on the device, so that the host's
// work between steps (reading the tokens, stop checks, outputs, the next schedule and its
// upload) overlaps the GPU's step instead of leaving the GPU idle.
#include <spdlog/spdlog.h>

#include <chrono>
#include <exception>
#include <utility>

#include "engine/in_flight_step.h"
#include "engine/llm_engine.h"
#include "engine/shard_sampling_plan.h"
#include "engine/step_builder.h"
#include "kernels/check.h"

namespace nanovllm {

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Row `row` of a step's logprobs, for `token` with `num_top` alternatives.
PositionLogprobs position_logprobs(const LogprobRows& rows, size_t row, int32_t token,
                                   int32_t num_top) {
  CHECK_LT(row, rows.num_rows());
  CHECK_LE(num_top, rows.width);
  PositionLogprobs p;
  p.token_id = token;
  p.logprob = rows.logprob[row];
  p.rank = rows.rank[row];
  const size_t first = row * static_cast<size_t>(rows.width);
  for (int32_t j = 0; j < num_top; ++j)
    p.top.emplace_back(rows.top_ids[first + j], rows.top_logprobs[first + j]);
  return p;
}

}  // namespace

LLMEngine::~LLMEngine() {
  // A step still in flight (a run given up midway) is collected, so that the executor hands
  // its result to no later engine. No throwing from a destructor: a failure here is the run's
  // failure already.
  if (in_flight_ == nullptr) return;
  try {
    executor_.collect();
  } catch (const std::exception& e) {
    spdlog::warn("the step in flight at the engine's end failed: {}", e.what());
  }
}

bool LLMEngine::is_finished() const {
  return scheduler_.is_finished() && in_flight_ == nullptr;
}

std::unique_ptr<InFlightStep> LLMEngine::launch(ScheduledBatch batch, StepCommand cmd) {
  auto step = std::make_unique<InFlightStep>();
  cmd.step_id = next_step_id_++;
  cmd.sample_from_shards =
      !cmd.logits_indices.empty() && step_samples_from_shards(batch.seqs, config_);
  step->samples = !cmd.logits_indices.empty();
  step->from_shards = cmd.sample_from_shards;
  // The host's account runs ahead of the device: the rows count as computed from the launch,
  // and the rows that reach their sequence's end (a chunk short of a prompt's end samples
  // nothing) owe a pending token until the results come.
  for (size_t b = 0; b < batch.seqs.size(); ++b) {
    Sequence* seq = batch.seqs[b];
    const int begin = seq->num_computed_tokens;
    seq->num_computed_tokens += batch.num_scheduled_tokens[b];
    step->owed.push_back(prompt_logprobs_rows(*seq, begin, seq->num_computed_tokens));
    if (seq->num_computed_tokens == seq->num_tokens() + seq->num_pending_tokens)
      step->sampled.push_back(seq);
  }
  CHECK_EQ(step->sampled.size(), cmd.logits_indices.size());
  for (Sequence* seq : step->sampled) ++seq->num_pending_tokens;
  step->batch = std::move(batch);
  const auto start = std::chrono::steady_clock::now();
  executor_.launch(cmd);
  stats_.executor_seconds += seconds_since(start);
  return step;
}

std::unique_ptr<InFlightStep> LLMEngine::schedule_and_launch() {
  const auto start = std::chrono::steady_clock::now();
  const int64_t preemptions_before = scheduler_.num_preemptions();
  ScheduledBatch batch = scheduler_.schedule();
  // Every admitted request fits the cache alone, so some sequence can always run.
  CHECK_MSG(!batch.empty(), "scheduler produced an empty batch with "
                                << scheduler_.waiting().size() << " waiting and "
                                << scheduler_.running().size() << " running");
  // A prompt preempted between chunks has not sampled yet: it holds no slot.
  for (Sequence* seq : batch.preempted)
    if (seq->sampling_slot >= 0) release_sampling_slot(*seq);
  StepCommand cmd = batch.is_prefill ? build_prefill_command(batch.seqs, batch.num_scheduled_tokens,
                                                             config_.kvcache_block_size,
                                                             sampling_slots_, config_.eos_token_ids)
                                     : build_decode_command(batch.seqs, config_.kvcache_block_size);
  const int64_t preemptions = scheduler_.num_preemptions() - preemptions_before;
  stats_.scheduler_seconds += seconds_since(start);
  std::unique_ptr<InFlightStep> step = launch(std::move(batch), std::move(cmd));
  step->preemptions = preemptions;
  return step;
}

std::unique_ptr<InFlightStep> LLMEngine::launch_ahead() {
  // Only a decode of exactly the running sequences, each one's next input pending: nothing
  // waits to be admitted, no prompt is between chunks.
  if (!config_.async_scheduling || !scheduler_.waiting().empty()) return nullptr;
  std::vector<Sequence*> seqs;  // [B]
  for (Sequence* seq : scheduler_.running()) {
    if (seq->num_pending_tokens != 1 || seq->num_computed_tokens != seq->num_tokens())
      return nullptr;
    // Its logprobs are read with its tokens; the next step would overwrite them first.
    if (seq->sampling_params.logprobs) return nullptr;
    // Finished by its pending token whatever it is: max_tokens or max_model_len.
    if (seq->num_completion_tokens() + 1 >= seq->sampling_params.max_tokens ||
        seq->num_tokens() + 1 >= config_.max_model_len)
      continue;
    seqs.push_back(seq);
  }
  if (seqs.empty() || !executor_.accepts_pending_inputs(static_cast<int>(seqs.size())))
    return nullptr;
  const auto start = std::chrono::steady_clock::now();
  ScheduledBatch batch;
  if (!scheduler_.schedule_ahead(seqs, batch)) return nullptr;
  StepCommand cmd = build_decode_command(batch.seqs, config_.kvcache_block_size);
  stats_.scheduler_seconds += seconds_since(start);
  ++stats_.num_steps_ahead;
  return launch(std::move(batch), std::move(cmd));
}

void LLMEngine::drop_from_in_flight(const Sequence* seq) {
  if (in_flight_ == nullptr) return;
  for (Sequence*& s : in_flight_->batch.seqs)
    if (s == seq) s = nullptr;
  for (Sequence*& s : in_flight_->sampled)
    if (s == seq) s = nullptr;
}

std::vector<RequestOutput> LLMEngine::complete(InFlightStep& step) {
  auto start = std::chrono::steady_clock::now();
  const StepResult result = executor_.collect();
  const std::vector<int32_t>& tokens = result.sampled_token_ids;
  stats_.executor_seconds += seconds_since(start);

  start = std::chrono::steady_clock::now();
  // Prompt logprobs rows come in the builder's order (prefill steps: never launched ahead, so
  // every row's sequence is still here).
  size_t prompt_row = 0;
  for (size_t b = 0; b < step.batch.seqs.size(); ++b) {
    Sequence* seq = step.batch.seqs[b];
    for (int t = step.owed[b].begin; t < step.owed[b].end; ++t)
      seq->prompt_logprobs.push_back(position_logprobs(result.prompt_logprobs, prompt_row++,
                                                       seq->token_ids[t + 1],
                                                       *seq->sampling_params.prompt_logprobs));
  }
  CHECK_EQ(prompt_row, result.prompt_logprobs.num_rows());
  CHECK_EQ(tokens.size(), step.sampled.size());
  std::vector<Sequence*> live;       // [S'] the sampled rows whose sequence is still unfinished
  std::vector<int32_t> live_tokens;  // [S']
  for (size_t i = 0; i < step.sampled.size(); ++i) {
    Sequence* seq = step.sampled[i];
    if (seq == nullptr) continue;
    CHECK_GT(seq->num_pending_tokens, 0);
    --seq->num_pending_tokens;
    live.push_back(seq);
    live_tokens.push_back(tokens[i]);
    if (!seq->sampling_params.logprobs) continue;
    seq->logprobs.push_back(
        position_logprobs(result.sampled_logprobs, i, tokens[i], *seq->sampling_params.logprobs));
    seq->cumulative_logprob += seq->logprobs.back().logprob;
  }
  const ScheduledBatch& batch = step.batch;
  ++stats_.num_steps;
  if (step.samples) ++stats_.num_sampling_steps;
  if (step.from_shards) ++stats_.num_shard_sampled_steps;
  stats_.num_preemptions += step.preemptions;
  ++(batch.is_prefill ? stats_.num_prefill_steps : stats_.num_decode_steps);
  stats_.num_prefill_tokens += batch.num_tokens() - batch.num_decode_tokens;
  stats_.num_decode_tokens += batch.num_decode_tokens;
  stats_.num_cached_tokens += batch.num_cached_tokens;
  std::vector<RequestOutput> outputs;
  for (Sequence* seq : scheduler_.postprocess(live, live_tokens)) {
    drop_from_in_flight(seq);  // the step after this one computed a row past its end
    seq->num_pending_tokens = 0;
    release_sampling_slot(*seq);
    outputs.push_back(output_of(*seq));
    ++stats_.num_finished;
    CHECK_EQ(sequences_.erase(seq->seq_id), 1u);  // frees the Sequence
  }
  stats_.scheduler_seconds += seconds_since(start);
  return outputs;
}

std::vector<RequestOutput> LLMEngine::step() {
  if (in_flight_ == nullptr) {
    if (scheduler_.is_finished()) return {};
    in_flight_ = schedule_and_launch();
  }
  // The next decode goes in before this step's tokens are read (when it can).
  std::unique_ptr<InFlightStep> current = std::exchange(in_flight_, launch_ahead());
  return complete(*current);
}

}  // namespace nanovllm
