#include "launcher/cli_parse.h"

#include <sstream>

#include "launcher/usage_error.h"

namespace nanovllm {

std::string HelpFormatter::make_option_name(const CLI::Option* opt, bool is_positional) const {
  if (is_positional || opt->get_items_expected() != 0 || opt->get_fnames().empty())
    return CLI::Formatter::make_option_name(opt, is_positional);
  std::string names;
  for (const std::string& s : opt->get_snames()) names += (names.empty() ? "-" : ",-") + s;
  for (const std::string& l : opt->get_lnames()) names += (names.empty() ? "--" : ",--") + l;
  return names;
}

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
