// The fixture of the launcher's command-line suites (cli_test, run_settings_test): a model
// folder and a prompts file in a temporary directory, and parse / ok / bad helpers over
// parse_launch_options with a given number of visible GPUs.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "launcher/cli.h"

namespace nanovllm {

namespace fs = std::filesystem;

class LaunchCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("nvtest-cli-" + std::to_string(::getpid()));
    fs::create_directories(dir_ / "model");
    std::ofstream(dir_ / "prompts.jsonl") << "{\"prompt\": \"hi\"}\n";
    model_ = (dir_ / "model").string();
    prompts_ = (dir_ / "prompts.jsonl").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  LaunchParse parse(std::vector<std::string> args, int gpus = 0) {
    args.insert(args.begin(), "nanovllm-launch");
    std::vector<const char*> argv;
    for (const auto& a : args) argv.push_back(a.c_str());
    return parse_launch_options(static_cast<int>(argv.size()), argv.data(), gpus);
  }
  LaunchOptions ok(std::vector<std::string> args, int gpus = 0) {
    const LaunchParse p = parse(args, gpus);
    EXPECT_TRUE(p.options.has_value()) << p.message;
    return p.options.value_or(LaunchOptions{});
  }
  // Expects a usage error whose message contains `needle`.
  void bad(std::vector<std::string> args, const std::string& needle, int gpus = 0) {
    const LaunchParse p = parse(args, gpus);
    EXPECT_FALSE(p.options.has_value());
    EXPECT_EQ(p.exit_code, 2);
    EXPECT_NE(p.message.find(needle), std::string::npos)
        << "message '" << p.message << "' should mention '" << needle << "'";
  }

  static std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

  fs::path dir_;
  std::string model_, prompts_;
};

}  // namespace nanovllm
