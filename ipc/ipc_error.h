// The error of the inter-process plumbing: a peer died, a wait ran past its overall limit, the
// run was aborted, or a segment could not be created/opened. These are conditions of the
// environment, not bugs (bugs, such as a message bigger than a slot or a corrupted slot, are
// CHECK failures). Either way a rank prints it and exits non-zero; the launcher tears down.
#pragma once

#include <stdexcept>

namespace nanovllm {

struct IpcError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace nanovllm
