// Every sizing flag's smallest and largest accepted value, alone and in pairs, on the tiny model
// with one short request on the CPU backend: each combination either serves the request (exit
// 0, one result line) or is refused before any weight loads (exit 2) with a message naming the
// flags at fault. Which one is decided in-process (parse_launch_options, make_run_settings: the
// same calls nanovllm-launch makes before loading), then every combination runs the binary,
// a few at a time.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "launcher/cli.h"
#include "launcher/run_settings.h"
#include "launcher/usage_error.h"
#include "tests/launcher/launch_test_support.h"

namespace nanovllm::testing {
namespace {

// The sizing flags README's "Using it" lists, with the smallest and largest value the CLI
// accepts (the `outside` values just past them are refused by the parser: checked below).
struct SizingFlag {
  std::string name, smallest, largest;
  std::vector<std::string> outside;
};
const std::vector<SizingFlag>& sizing_flags() {
  static const std::vector<SizingFlag> flags = {
      {"--max-model-len", "2", "2147483647", {"1", "2147483648"}},
      {"--max-num-seqs", "1", "2147483647", {"0", "2147483648"}},
      {"--max-num-batched-tokens", "1", "2147483647", {"0", "2147483648"}},
      {"--long-prefill-token-threshold", "0", "2147483647", {"-1", "2147483648"}},
      {"--block-size", "16", "2147483632", {"0", "2147483647", "2147483648"}},
      {"--num-gpu-blocks-override", "1", "2147483647", {"0", "2147483648"}},
      // The smallest positive double (denormal) and the largest finite one.
      {"--cpu-kv-cache-space",
       "4.9406564584124654e-324",
       "1.7976931348623157e308",
       {"0", "-1", "inf", "1e309", "nan"}},
      {"--gpu-memory-utilization",
       "4.9406564584124654e-324",
       "1",
       {"0", "1.0000000000000002", "nan"}},
  };
  return flags;
}

struct Flag {
  std::string name, value;
};
using Combo = std::vector<Flag>;

std::string describe(const Combo& c) {
  std::string s;
  for (const Flag& f : c) s += (s.empty() ? "" : " ") + f.name + " " + f.value;
  return s;
}

fs::path one_request() {
  static const fs::path p =
      write_file("corner-request.jsonl",
                 R"({"id": "q", "prompt_token_ids": [9707], "max_tokens": 1, "temperature": 0})"
                 "\n");
  return p;
}

std::vector<std::string> base_args(const Combo& c) {
  std::vector<std::string> args = {"--device", "cpu"};
  for (const Flag& f : c) args.insert(args.end(), {f.name, f.value});
  return args;
}

// nullopt: accepted (the run must serve the request); else the refusal's message.
std::optional<std::string> refusal(const Combo& c) {
  std::vector<std::string> args = {"nanovllm-launch", tiny_model().string(),
                                   one_request().string()};
  for (const std::string& a : base_args(c)) args.push_back(a);
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  const LaunchParse parse = parse_launch_options(static_cast<int>(argv.size()), argv.data(), 0);
  if (!parse.options) {
    EXPECT_EQ(parse.exit_code, 2) << describe(c) << ": " << parse.message;
    return parse.message;
  }
  try {
    make_run_settings(*parse.options);
  } catch (const UsageError& e) {
    return std::string(e.what());
  } catch (const std::exception& e) {  // exit 1 before loading: neither accepted nor refused
    ADD_FAILURE() << describe(c) << ": not a usage error: " << e.what();
    return std::string(e.what());
  }
  return std::nullopt;
}

bool names(const std::string& message, const Flag& f) {
  return message.find(f.name) != std::string::npos;
}

TEST(LaunchFlagCorners, TheCornersAreTheLimitsTheParserAccepts) {
  REQUIRE_TOKENIZER();
  spdlog::set_level(spdlog::level::off);
  for (const SizingFlag& f : sizing_flags()) {
    for (const std::string& v : {f.smallest, f.largest}) {
      std::vector<std::string> args = {"nanovllm-launch", tiny_model().string(),
                                       one_request().string(), f.name, v};
      std::vector<const char*> argv;
      for (const std::string& a : args) argv.push_back(a.c_str());
      EXPECT_TRUE(parse_launch_options(static_cast<int>(argv.size()), argv.data(), 0).options)
          << f.name << " " << v << " should parse";
    }
    for (const std::string& v : f.outside) {
      std::vector<std::string> args = {"nanovllm-launch", tiny_model().string(),
                                       one_request().string(), f.name, v};
      std::vector<const char*> argv;
      for (const std::string& a : args) argv.push_back(a.c_str());
      const LaunchParse p = parse_launch_options(static_cast<int>(argv.size()), argv.data(), 0);
      EXPECT_FALSE(p.options) << f.name << " " << v << " should be refused";
      EXPECT_EQ(p.exit_code, 2);
      EXPECT_NE(p.message.find(f.name), std::string::npos) << p.message;
    }
  }
}

struct Outcome {
  Combo combo;
  std::optional<std::string> refused;  // the in-process refusal
  Launch launch;
};

TEST(LaunchFlagCorners, EveryCornerAloneAndInPairsServesOneRequestOrIsRefusedBeforeLoading) {
  REQUIRE_TOKENIZER();
  spdlog::set_level(spdlog::level::off);  // make_run_settings logs its start-up lines
  std::vector<Combo> combos;
  std::map<std::string, bool> refused_alone;  // "flag value" -> refused on its own
  const auto corners = [](const SizingFlag& f) {
    return std::vector<Flag>{{f.name, f.smallest}, {f.name, f.largest}};
  };
  const auto& flags = sizing_flags();
  for (size_t i = 0; i < flags.size(); ++i) {
    for (const Flag& a : corners(flags[i])) {
      combos.push_back({a});
      for (size_t j = i + 1; j < flags.size(); ++j)
        for (const Flag& b : corners(flags[j])) combos.push_back({a, b});
    }
  }
  std::vector<Outcome> outcomes;
  for (const Combo& c : combos) {
    outcomes.push_back({c, refusal(c), {}});
    if (c.size() == 1) refused_alone[describe(c)] = outcomes.back().refused.has_value();
  }

  // Which flags a refusal must name: a single corner its flag; a pair the flag whose removal
  // makes it acceptable (one refused alone, the other not), both when neither is refused
  // alone (the pair is the fault), and one of them when each is refused alone.
  int accepted = 0;
  for (const Outcome& o : outcomes) {
    if (!o.refused) {
      ++accepted;
      continue;
    }
    const std::string& m = *o.refused;
    if (o.combo.size() == 1) {
      EXPECT_TRUE(names(m, o.combo[0])) << describe(o.combo) << ": " << m;
      continue;
    }
    const Flag &a = o.combo[0], &b = o.combo[1];
    const bool a_bad = refused_alone[describe({a})], b_bad = refused_alone[describe({b})];
    const bool named = a_bad && b_bad   ? names(m, a) || names(m, b)
                       : a_bad != b_bad ? names(m, a_bad ? a : b)
                                        : names(m, a) && names(m, b);
    EXPECT_TRUE(named) << describe(o.combo) << " (alone: " << (a_bad ? "refused" : "accepted")
                       << ", " << (b_bad ? "refused" : "accepted") << "): " << m;
  }
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, static_cast<int>(outcomes.size()));

  // The binary agrees with every decision: a few runs at a time (each loads the model once).
  constexpr size_t kParallel = 4;
  for (size_t next = 0, done = 0; done < outcomes.size();) {
    while (next < outcomes.size() && next - done < kParallel) {
      Outcome& o = outcomes[next];
      const std::string tag = "corner" + std::to_string(next++);
      std::vector<std::string> args = base_args(o.combo);
      args.insert(args.end(), {"-o", (work_dir() / (tag + ".jsonl")).string()});
      o.launch = spawn_plain(tiny_model(), one_request(), tag, args);
    }
    Outcome& o = outcomes[done++];
    const int rc = finish(o.launch);
    const std::string err = read_text(o.launch.err), what = describe(o.combo);
    if (o.refused) {
      EXPECT_EQ(rc, 2) << what << "\n" << err;
      // The same message, before any rank started or weight loaded.
      EXPECT_NE(err.find(o.refused->substr(0, o.refused->find('\n'))), std::string::npos)
          << what << "\n"
          << err;
      EXPECT_EQ(err.find("rank 0 started"), std::string::npos) << what << "\n" << err;
      EXPECT_EQ(err.find("model loaded"), std::string::npos) << what << "\n" << err;
    } else {
      EXPECT_EQ(rc, 0) << what << "\n" << err;
      const fs::path out = work_dir() / ("corner" + std::to_string(done - 1) + ".jsonl");
      const std::vector<Json> lines = fs::exists(out) ? read_jsonl(out) : std::vector<Json>{};
      EXPECT_EQ(lines.size(), 1u) << what << "\n" << err;
      if (lines.size() != 1) continue;  // the others still run and are reaped
      EXPECT_EQ(lines[0]["id"], "q") << what;
      EXPECT_NE(lines[0]["finish_reason"], "error") << what << ": " << lines[0].dump();
      EXPECT_EQ(lines[0]["completion_tokens"], 1) << what << ": " << lines[0].dump();
    }
  }
}

}  // namespace
}  // namespace nanovllm::testing
