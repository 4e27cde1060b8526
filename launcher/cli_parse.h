// The shared ending of our command lines (nanovllm-launch, nanovllm-bench): CLI11 parsing and
// our own checks run inside one call; --help and --version become text for stdout with exit
// 0, a CLI11 error or a UsageError becomes "<program>: <why>" for stderr with exit 2.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <optional>
#include <string>

namespace nanovllm {

struct CliExit {
  int exit_code = 0;
  std::string message;
};

// CLI11's help text, but a flag pair (`--enable-x,!--no-enable-x`) is listed as
// `--enable-x,--no-enable-x`: CLI11 appends the value a negated name sets (`{false}`), which
// reads as the default. The default goes in the pair's description instead.
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_option_name(const CLI::Option* opt, bool is_positional) const override;
};

// nullopt: `parse` went through and the program goes on.
std::optional<CliExit> run_cli_parse(CLI::App& app, const std::string& program,
                                     const std::function<void()>& parse);

}  // namespace nanovllm
