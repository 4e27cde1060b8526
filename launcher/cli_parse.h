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

// nullopt: `parse` went through and the program goes on.
std::optional<CliExit> run_cli_parse(CLI::App& app, const std::string& program,
                                     const std::function<void()>& parse);

}  // namespace nanovllm
