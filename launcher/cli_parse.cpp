#include "launcher/cli_parse.h"

#include <sstream>

#include "launcher/usage_error.h"

namespace nanovllm {

std::optional<CliExit> run_cli_parse(CLI::App& app, const std::string& program,
                                     const std::function<void()>& parse) {
  try {
    parse();
  } catch (const CLI::ParseError& e) {
    std::ostringstream out, err;
    const int code = app.exit(e, out, err);
    if (e.get_exit_code() == 0) return CliExit{0, out.str()};
    return CliExit{code == 0 ? 0 : kExitUsage, program + ": " + err.str()};
  } catch (const UsageError& e) {
    return CliExit{kExitUsage, program + ": " + e.what() + "\n"};
  }
  return std::nullopt;
}

}  // namespace nanovllm
