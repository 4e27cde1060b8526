#include "engine/request.h"

#include <utility>

namespace nanovllm {

void Request::fail(std::string message, std::string field) {
  // The first problem found is the one reported: later checks build on earlier ones.
  if (error) return;
  error = RequestError{std::move(message), line, std::move(field)};
}

}  // namespace nanovllm
