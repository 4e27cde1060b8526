#include "layers/rope_scaling_config.h"

#include <nlohmann/json.hpp>

namespace nanovllm {
namespace {

using nlohmann::json;

// Fields of the one rope object, with messages naming the file and "<object>.<field>".
struct RopeFields {
  const json& r;
  const std::string& file;
  const std::string& object;

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw ModelFolderError(file + ": field '" + object + "." + field + "': " + what);
  }
  bool has(const char* field) const { return r.contains(field) && !r.at(field).is_null(); }
  double positive(const char* field) const {
    const json& v = r.at(field);
    if (!v.is_number()) fail(field, "expected a number, got " + v.dump());
    const double x = v.get<double>();
    if (!(x > 0)) fail(field, "must be positive, got " + v.dump());
    return x;
  }
};

// Which rope object names the type: rope_scaling when set, else rope_parameters (which
// transformers 5 writes for every model, type "default" included).
const char* rope_object(const json& config) {
  if (config.contains("rope_scaling") && !config.at("rope_scaling").is_null())
    return "rope_scaling";
  if (config.contains("rope_parameters") && !config.at("rope_parameters").is_null())
    return "rope_parameters";
  return nullptr;
}

}  // namespace

std::optional<RopeScaling> parse_rope_scaling(const json& config, const std::string& config_name,
                                              int64_t max_position_embeddings) {
  const char* name = rope_object(config);
  if (name == nullptr) return std::nullopt;
  const std::string object = name;
  const json& r = config.at(object);
  if (!r.is_object())
    throw ModelFolderError(config_name + ": field '" + object + "': expected an object, got " +
                           r.dump());
  const RopeFields f{r, config_name, object};
  // transformers 4 spelled the type "type"; rope_scaling without one names no known type.
  const char* type_key = f.has("rope_type") ? "rope_type" : f.has("type") ? "type" : nullptr;
  if (type_key == nullptr) {
    if (object == "rope_parameters") return std::nullopt;  // just rope_theta
    f.fail("rope_type", "missing: not supported: rope scaling " + r.dump());
  }
  const json& type = r.at(type_key);
  if (!type.is_string()) f.fail(type_key, "expected a string, got " + type.dump());
  const std::string t = type.get<std::string>();
  if (t == "default") return std::nullopt;
  if (t != "yarn")
    f.fail(type_key, "not supported: rope type \"" + t + "\" (\"default\" and \"yarn\" are)");
  for (const char* deepseek : {"mscale", "mscale_all_dim"})
    if (f.has(deepseek)) f.fail(deepseek, "not supported: YaRN's mscale variant (DeepSeek's)");
  RopeScaling s;
  if (!f.has("factor")) f.fail("factor", "missing (YaRN needs its scaling factor)");
  s.factor = f.positive("factor");
  if (s.factor < 1.0) f.fail("factor", "must be >= 1, got " + r.at("factor").dump());
  s.original_max_position_embeddings = max_position_embeddings;
  if (f.has("original_max_position_embeddings")) {
    const json& v = r.at("original_max_position_embeddings");
    if (!v.is_number_integer() || v.get<int64_t>() <= 0)
      f.fail("original_max_position_embeddings", "expected a positive integer, got " + v.dump());
    s.original_max_position_embeddings = v.get<int64_t>();
  }
  if (f.has("beta_fast")) s.beta_fast = f.positive("beta_fast");
  if (f.has("beta_slow")) s.beta_slow = f.positive("beta_slow");
  if (f.has("attention_factor")) s.attention_factor = f.positive("attention_factor");
  if (f.has("truncate")) {
    if (!r.at("truncate").is_boolean())
      f.fail("truncate", "expected true or false, got " + r.at("truncate").dump());
    s.truncate = r.at("truncate").get<bool>();
  }
  return s;
}

}  // namespace nanovllm
