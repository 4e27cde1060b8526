#include "engine/job/pending_work.h"

#include <spdlog/spdlog.h>

#include <string>
#include <utility>

#include "engine/chat_template.h"
#include "engine/request_reader.h"
#include "engine/resume.h"
#include "engine/sampling_defaults.h"

namespace nanovllm {

namespace {

// Reads and validates every line before any weight is loaded, so a bad file costs seconds.
std::vector<Request> read_and_validate(const JobSettings& s, const Tokenizer& tokenizer) {
  RequestValidator validator;
  // Ids the model can embed: its vocab_size (>= the tokenizer's, padded for the GPU).
  validator.vocab_size = s.vocab_size;
  validator.max_model_len = s.engine.max_model_len;
  validator.encode = [&tokenizer](std::string_view text) { return tokenizer.encode(text); };
  validator.render_chat = [](const nlohmann::json& messages, bool enable_thinking) {
    return render_chat(messages, /*add_generation_prompt=*/true, enable_thinking);
  };
  const SamplingLevels levels{load_generation_config(s.model_dir), s.cli_sampling};
  std::vector<Request> requests = read_requests_file(s.prompts, validator, levels, s.shard);
  if (s.shard.count > 1)
    spdlog::info("--shard {}/{}: {} requests of {}, those whose index is {} mod {}", s.shard.index,
                 s.shard.count, requests.size(), s.prompts.string(), s.shard.index, s.shard.count);
  std::string raised;  // lines whose temperature was raised to the minimum
  for (Request& r : requests) {
    if (r.ok() && !r.sampling_params.seed)
      r.sampling_params.seed = derive_request_seed(s.seed, r.id);
    if (r.ok() && r.temperature_raised)
      raised += (raised.empty() ? "" : ", ") + std::to_string(r.line);
  }
  if (!raised.empty())
    spdlog::warn("temperature below {} raised to {} (as vLLM does) on line(s) {}",
                 kMinSamplingTemperature, kMinSamplingTemperature, raised);
  return requests;
}

}  // namespace

PreparedJob prepare_job(const JobSettings& s) {
  PreparedJob job{Tokenizer::from_file((s.model_dir / "tokenizer.json").string()), {}};
  PendingWork& work = job.work;
  work.requests = read_and_validate(s, job.tokenizer);
  if (s.resume) {
    const ResumeState state = prepare_resume(*s.output);
    const size_t before = work.requests.size();
    work.requests = pending_requests(std::move(work.requests), state);
    int64_t partial = 0;
    for (const Request& r : work.requests) {
      work.written.push_back(written_completions(r, state));
      partial += work.written.back().empty() ? 0 : 1;
    }
    spdlog::info("--resume: {} of {} requests already answered in {}; {} to go",
                 before - work.requests.size(), before, s.output->string(), work.requests.size());
    if (partial > 0)
      spdlog::info(
          "--resume: {} of them have some of their n completions written; only the "
          "missing ones run",
          partial);
  }
  work.written.resize(work.requests.size());
  return job;
}

}  // namespace nanovllm
