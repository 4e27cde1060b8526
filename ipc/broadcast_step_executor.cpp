#include "ipc/broadcast_step_executor.h"

#include "ipc/step_command_serialization.h"
#include "kernels/check.h"

namespace nanovllm {

BroadcastStepExecutor::BroadcastStepExecutor(std::unique_ptr<StepExecutor> local, RingWriter& ring)
    : local_(std::move(local)), ring_(ring) {
  // Commands are only ever written to a ring made for them (its readers decode this schema).
  CHECK_MSG(ring_.payload_schema() == kStepCommandSchemaVersion,
            "the ring carries payload schema " << ring_.payload_schema()
                                               << ", step commands are schema "
                                               << kStepCommandSchemaVersion);
}

bool BroadcastStepExecutor::set_phase_timer(PhaseTimer* timer) {
  if (!local_->set_phase_timer(timer)) return false;
  eager_ = timer != nullptr;
  return true;
}

StepResult BroadcastStepExecutor::execute(const StepCommand& cmd) {
  if (eager_ && !cmd.eager) {
    StepCommand marked = cmd;  // profiling only: the copy's cost does not matter
    marked.eager = true;
    return execute(marked);
  }
  const std::vector<uint8_t> bytes = encode_step_command(cmd);
  // The slots were sized for the largest step the limits allow (step_ring_sizing.h).
  CHECK_MSG(bytes.size() <= ring_.slot_bytes(),
            "step " << cmd.step_id << " encodes to " << bytes.size()
                    << " bytes, more than a ring slot (" << ring_.slot_bytes() << ")");
  ring_.write(bytes);
  ++commands_sent_;
  return local_->execute(cmd);
}

}  // namespace nanovllm
