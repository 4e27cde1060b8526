#include "rank/local_step_runner.h"

namespace nanovllm {

std::vector<int32_t> LocalStepRunner::run(std::span<Sequence* const> seqs, bool is_prefill) {
  StepCommand cmd = is_prefill ? ModelRunner::prepare_prefill(seqs, runner_.block_size())
                               : ModelRunner::prepare_decode(seqs, runner_.block_size());
  cmd.step_id = next_step_id_++;
  std::vector<int32_t> tokens = runner_.execute(cmd);
  CHECK_EQ(tokens.size(), seqs.size());
  return tokens;
}

}  // namespace nanovllm
