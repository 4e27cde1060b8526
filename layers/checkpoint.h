// The weights of a model folder: model.safetensors, or the shards listed by
// model.safetensors.index.json (weight_map: tensor name -> shard file). Everything stays
// memory-mapped; tensors point into the mappings, which this object owns (move-only).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/tensor.h"
#include "layers/model_config.h"
#include "layers/safetensors.h"

namespace nanovllm {

class WeightUploader;  // layers/weight_uploader.h

struct CheckpointTensor {
  std::string name;
  DType dtype = DType::kBf16;
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;  // nbytes bytes inside a mapping; may be unaligned only
                                    // if the file was written without header padding
  size_t nbytes = 0;
  // How Parameter::load moves this tensor's bytes to a device: the owning Checkpoint's
  // uploader (null for a tensor made by hand: Parameter::load then uses a one-off one).
  WeightUploader* uploader = nullptr;
};

class Checkpoint {
 public:
  // Throws ModelFolderError naming the file (and tensor) for anything missing or malformed.
  static Checkpoint open(const std::filesystem::path& model_dir);

  Checkpoint(Checkpoint&&) noexcept;
  Checkpoint& operator=(Checkpoint&&) noexcept;
  Checkpoint(const Checkpoint&) = delete;
  Checkpoint& operator=(const Checkpoint&) = delete;
  ~Checkpoint();  // waits for the uploads still in flight from the staging buffers

  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }
  // Throws ModelFolderError naming the tensor and the folder when absent.
  const CheckpointTensor& tensor(const std::string& name) const;
  std::vector<std::string> names() const;  // sorted
  const std::filesystem::path& dir() const { return dir_; }
  size_t num_files() const { return files_.size(); }

 private:
  Checkpoint();
  void add_file(const std::filesystem::path& path,
                const std::map<std::string, std::string>* wanted);

  std::filesystem::path dir_;
  std::vector<SafetensorsFile> files_;  // the mappings every CheckpointTensor points into
  std::map<std::string, CheckpointTensor> tensors_;
  // Staging for the tensors' way to a device (every tensor points at it; a heap object, so
  // the pointers survive a move of the Checkpoint). Destroyed first: it waits for its copies.
  std::unique_ptr<WeightUploader> uploader_;
};

// Every tensor the config implies must be present with exactly its shape (a tied model may
// also carry lm_head.weight). Throws ModelFolderError naming the tensor, expected and
// actual shape; tensors the model does not use are logged and ignored.
void validate_checkpoint(const ModelConfig& config, const Checkpoint& checkpoint);

}  // namespace nanovllm
