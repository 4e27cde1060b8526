#include "launcher/engine_options.h"

#include <map>
#include <vector>

namespace nanovllm {

namespace {

enum class Kind { kInt, kFloat, kBool, kString, kObject };

// A keyword: its JSON kind and the nanovllm-launch flag it becomes ("" for the ones handled
// apart). nano-vllm's names first, then vLLM's.
struct Keyword {
  Kind kind;
  const char* flag;
};
const std::map<std::string, Keyword>& keywords() {
  static const std::map<std::string, Keyword> k = {
      {"model", {Kind::kString, ""}},
      {"tensor_parallel_size", {Kind::kInt, "--tp"}},
      {"enforce_eager", {Kind::kBool, "--enforce-eager"}},
      {"max_num_batched_tokens", {Kind::kInt, "--max-num-batched-tokens"}},
      {"max_num_seqs", {Kind::kInt, "--max-num-seqs"}},
      {"max_model_len", {Kind::kInt, "--max-model-len"}},
      {"gpu_memory_utilization", {Kind::kFloat, "--gpu-memory-utilization"}},
      {"kvcache_block_size", {Kind::kInt, "--block-size"}},
      {"num_kvcache_blocks", {Kind::kInt, "--num-gpu-blocks-override"}},
      {"block_size", {Kind::kInt, "--block-size"}},
      {"num_gpu_blocks_override", {Kind::kInt, "--num-gpu-blocks-override"}},
      {"enable_prefix_caching", {Kind::kBool, "--enable-prefix-caching"}},
      {"enable_chunked_prefill", {Kind::kBool, "--enable-chunked-prefill"}},
      {"async_scheduling", {Kind::kBool, "--async-scheduling"}},
      {"seed", {Kind::kInt, "--seed"}},
      {"device", {Kind::kString, "--device"}},
      {"disable_custom_all_reduce", {Kind::kBool, "--disable-custom-all-reduce"}},
      {"disable_shard_sampling", {Kind::kBool, "--disable-shard-sampling"}},
      {"cpu_kv_cache_space", {Kind::kFloat, "--cpu-kv-cache-space"}},
      {"hf_overrides", {Kind::kObject, "--hf-overrides"}},
      {"kv_cache_dtype", {Kind::kString, "--kv-cache-dtype"}},
      {"log_level", {Kind::kString, "--log-level"}},
      {"worker_path", {Kind::kString, ""}},
  };
  return k;
}

// A boolean flag the launcher also takes as --no-...: false is said, not left to the default.
bool has_no_form(const std::string& flag) {
  return flag.rfind("--enable-", 0) == 0 || flag == "--async-scheduling";
}

bool has_kind(const nlohmann::json& v, Kind kind) {
  switch (kind) {
    case Kind::kInt:
      return v.is_number_integer();
    case Kind::kFloat:
      return v.is_number();
    case Kind::kBool:
      return v.is_boolean();
    case Kind::kString:
      return v.is_string();
    case Kind::kObject:
      return v.is_object();
  }
  return false;
}

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kInt:
      return "an int";
    case Kind::kFloat:
      return "a number";
    case Kind::kBool:
      return "a bool";
    case Kind::kString:
      return "a str";
    case Kind::kObject:
      return "a dict";
  }
  return "?";
}

// The launcher's refusal in the caller's words: its flags (and their --no- forms) become the
// keywords given, the program's prefix and the "--help" hint go.
std::string in_keywords(std::string message, const nlohmann::json& options) {
  const auto replace_all = [&message](const std::string& from, const std::string& to) {
    for (size_t at = 0; (at = message.find(from, at)) != std::string::npos; at += to.size())
      message.replace(at, from.size(), to);
  };
  for (const std::string prefix : {"nanovllm-launch: ", "nanovllm: "})
    if (message.rfind(prefix, 0) == 0) message.erase(0, prefix.size());
  if (const size_t hint = message.find("\nRun with --help"); hint != std::string::npos)
    message.erase(hint);
  while (!message.empty() && message.back() == '\n') message.pop_back();
  for (const auto& [name, value] : options.items()) {
    const auto it = keywords().find(name);
    if (it == keywords().end() || *it->second.flag == '\0') continue;
    const std::string flag = it->second.flag;
    if (has_no_form(flag)) replace_all("--no-" + flag.substr(2), name);
    replace_all(flag, name);
  }
  return "LLM(): " + message;
}

}  // namespace

EngineOptions engine_options_from_json(const nlohmann::json& options) {
  if (!options.is_object())
    throw EngineOptionError("TypeError", "engine options: expected an object");
  EngineOptions out;
  if (!options.contains("model") || !options["model"].is_string())
    throw EngineOptionError("TypeError", "LLM() missing the model folder ('model', a str)");
  const std::filesystem::path model = options["model"].get<std::string>();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(model / "config.json", ec))
    throw EngineOptionError("ValueError", "model folder '" + model.string() +
                                              "' has no config.json (a Hugging Face model folder "
                                              "is expected)");
  // The launcher's parser wants a prompts file; config.json stands in (never read as one).
  std::vector<std::string> args = {"nanovllm", model.string(), (model / "config.json").string()};
  for (const auto& [name, value] : options.items()) {
    const auto it = keywords().find(name);
    if (it == keywords().end())
      throw EngineOptionError("TypeError",
                              "LLM() got an unexpected keyword argument '" + name + "'");
    if (value.is_null()) continue;  // None: the default
    const Keyword& k = it->second;
    if (!has_kind(value, k.kind))
      throw EngineOptionError(
          "TypeError", "LLM(" + name + "=" + value.dump() + "): expected " + kind_name(k.kind));
    if (name == "worker_path") out.worker_path = value.get<std::string>();
    if (*k.flag == '\0') continue;
    // nano-vllm's num_kvcache_blocks = -1: sized from memory, as when not given.
    if (name == "num_kvcache_blocks" && value.get<int64_t>() < 0) continue;
    if (k.kind == Kind::kBool) {
      const bool on = value.get<bool>();
      const std::string flag = k.flag;
      if (has_no_form(flag))
        args.push_back(on ? flag : "--no-" + flag.substr(2));
      else if (on)
        args.push_back(flag);
      continue;
    }
    args.push_back(k.flag);
    args.push_back(value.is_string() ? value.get<std::string>() : value.dump());
  }
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  const LaunchParse parse = parse_launch_options(static_cast<int>(argv.size()), argv.data());
  if (!parse.options) throw EngineOptionError("ValueError", in_keywords(parse.message, options));
  out.launch = *parse.options;
  out.launch.prompts.clear();  // no prompts file: nothing sized from one
  return out;
}

}  // namespace nanovllm
