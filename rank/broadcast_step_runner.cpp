#include "rank/broadcast_step_runner.h"

#include "ipc/step_command_serialization.h"
#include "kernels/check.h"

namespace nanovllm {

void BroadcastStepRunner::broadcast(const StepCommand& cmd) {
  const std::vector<uint8_t> bytes = encode_step_command(cmd);
  // The slots were sized for the largest step the limits allow (step_ring_sizing.h).
  CHECK_MSG(bytes.size() <= ring_.slot_bytes(),
            "step " << cmd.step_id << " encodes to " << bytes.size()
                    << " bytes, more than a ring slot (" << ring_.slot_bytes() << ")");
  ring_.write(bytes);
}

std::vector<int32_t> BroadcastStepRunner::run(std::span<Sequence* const> seqs, bool is_prefill) {
  StepCommand cmd = is_prefill ? ModelRunner::prepare_prefill(seqs, runner_.block_size())
                               : ModelRunner::prepare_decode(seqs, runner_.block_size());
  cmd.step_id = next_step_id_++;
  broadcast(cmd);
  std::vector<int32_t> tokens = runner_.execute(cmd);
  CHECK_EQ(tokens.size(), seqs.size());
  return tokens;
}

void BroadcastStepRunner::send_exit() {
  StepCommand exit;
  exit.kind = StepKind::EXIT;
  exit.step_id = next_step_id_++;
  broadcast(exit);
}

}  // namespace nanovllm
