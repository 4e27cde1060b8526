#include "layers/checkpoint.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <set>

#include "layers/model_tensors.h"
#include "layers/weight_uploader.h"

namespace nanovllm {

namespace fs = std::filesystem;

Checkpoint::Checkpoint() : uploader_(std::make_unique<WeightUploader>()) {}
Checkpoint::Checkpoint(Checkpoint&&) noexcept = default;
Checkpoint& Checkpoint::operator=(Checkpoint&&) noexcept = default;
Checkpoint::~Checkpoint() = default;

Checkpoint Checkpoint::open(const fs::path& model_dir) {
  Checkpoint ck;
  ck.dir_ = model_dir;
  const fs::path single = model_dir / "model.safetensors";
  const fs::path index = model_dir / "model.safetensors.index.json";
  if (fs::exists(index)) {
    const nlohmann::json j = read_json_file(index);
    const std::string where = index.string() + ": field 'weight_map': ";
    if (!j.is_object() || !j.contains("weight_map") || !j.at("weight_map").is_object())
      throw ModelFolderError(where + "missing or not an object");
    // shard file -> the names the index puts in it
    std::map<std::string, std::map<std::string, std::string>> shards;
    for (const auto& [name, file] : j.at("weight_map").items()) {
      if (!file.is_string())
        throw ModelFolderError(where + "tensor '" + name + "' maps to " + file.dump());
      const std::string f = file.get<std::string>();
      // Shards live in the folder itself; a path could point anywhere on disk.
      if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..")
        throw ModelFolderError(where + "tensor '" + name + "': bad shard file name '" + f + "'");
      shards[f][name] = f;
    }
    if (shards.empty()) throw ModelFolderError(where + "empty");
    for (const auto& [file, names] : shards) ck.add_file(model_dir / file, &names);
  } else if (fs::exists(single)) {
    ck.add_file(single, nullptr);
  } else {
    throw ModelFolderError(model_dir.string() +
                           ": no model.safetensors or model.safetensors.index.json");
  }
  spdlog::debug("checkpoint {}: {} tensors in {} files", model_dir.string(), ck.tensors_.size(),
                ck.files_.size());
  return ck;
}

void Checkpoint::add_file(const fs::path& path, const std::map<std::string, std::string>* wanted) {
  files_.push_back(SafetensorsFile::open(path));
  const SafetensorsFile& file = files_.back();
  std::set<std::string> seen;
  for (const SafetensorsTensor& t : file.tensors()) {
    seen.insert(t.name);
    if (wanted != nullptr && wanted->count(t.name) == 0) continue;  // not indexed here
    CheckpointTensor ct{
        t.name, t.dtype, t.shape, file.data(t), static_cast<size_t>(t.nbytes()), uploader_.get()};
    if (!tensors_.emplace(t.name, std::move(ct)).second)
      throw ModelFolderError(path.string() + ": tensor '" + t.name + "' appears in two files");
  }
  if (wanted != nullptr) {
    for (const auto& [name, unused] : *wanted) {
      if (seen.count(name) == 0)
        throw ModelFolderError(path.string() + ": tensor '" + name +
                               "' is listed in model.safetensors.index.json but not in the file");
    }
  }
}

const CheckpointTensor& Checkpoint::tensor(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end())
    throw ModelFolderError(dir_.string() + ": checkpoint has no tensor '" + name + "'");
  return it->second;
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, t] : tensors_) out.push_back(name);
  return out;
}

void validate_checkpoint(const ModelConfig& config, const Checkpoint& checkpoint) {
  std::vector<TensorSpec> specs = model_tensor_specs(config);
  if (config.tie_word_embeddings && checkpoint.contains("lm_head.weight"))
    specs.push_back(
        {"lm_head.weight", {config.vocab_size, config.hidden_size}, TensorRole::kLmHead});
  std::set<std::string> expected;
  for (const TensorSpec& spec : specs) {
    expected.insert(spec.name);
    const CheckpointTensor& t = checkpoint.tensor(spec.name);
    if (t.shape != spec.shape)
      throw ModelFolderError(checkpoint.dir().string() + ": tensor '" + spec.name +
                             "': expected shape " + shape_to_string(spec.shape) +
                             " from config.json, found " + shape_to_string(t.shape));
  }
  for (const std::string& name : checkpoint.names()) {
    if (expected.count(name) == 0)
      spdlog::warn("{}: ignoring tensor '{}' that the model does not use",
                   checkpoint.dir().string(), name);
  }
}

}  // namespace nanovllm
