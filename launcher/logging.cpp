#include "launcher/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace nanovllm {

void configure_logging(spdlog::level::level_enum level, const std::string& who) {
  static const auto logger = spdlog::stderr_color_mt("nanovllm");
  spdlog::set_default_logger(logger);
  spdlog::set_level(level);
  spdlog::set_pattern("[%H:%M:%S.%e] [" + who + "] [%^%l%$] %v");
}

}  // namespace nanovllm
