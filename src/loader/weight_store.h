// WeightStore: every named weight tensor of a model, as views into memory-mapped files (one
// GGUF, or one or more safetensors shards). Owns the mappings, so the views live as long as it.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "loader/quantization_config.h"
#include "tensor/tensor.h"

namespace lm {

class GgufFile;
class SafetensorsFile;

class WeightStore {
 public:
  WeightStore();
  WeightStore(WeightStore&&) noexcept;
  WeightStore& operator=(WeightStore&&) noexcept;
  ~WeightStore();

  // A Hugging Face model folder: model.safetensors, or the shards named by
  // model.safetensors.index.json. With `quantization` (a pre-quantized checkpoint), its quantized
  // Linears are repacked at load into `<module>.weight` tensors (loader/quantized_checkpoint.h).
  static Result<WeightStore> from_hf_folder(
      const std::string& dir, const std::optional<QuantizationConfig>& quantization = {});
  // Takes the tensors of an already opened GGUF file (shared with the config and vocab readers).
  static WeightStore from_gguf(std::shared_ptr<const GgufFile> gguf);

  const Tensor* find(const std::string& name) const;
  const std::map<std::string, Tensor>& tensors() const { return tensors_; }
  // Where the weights came from, for error messages.
  const std::string& origin() const { return origin_; }
  // MappedFile::drop_pages for [p, p + bytes), the bytes of one of this store's tensors, once
  // they were copied elsewhere. For a tensor the load repacked into memory of its own, that
  // memory's pages are released: read again they are zeros, so only bytes that are copied and
  // never read again may be dropped (the model's prepared copy is what it serves from).
  void drop_pages(const void* p, size_t bytes) const;

  // What the load repacked (e.g. "gptq 4-bit: 14 quantized Linears repacked (14 as Q4_0)"), or
  // empty for an unquantized checkpoint.
  const std::string& repack_summary() const { return repack_summary_; }

 private:
  std::vector<std::shared_ptr<const void>> owners_;  // keeps the mappings alive
  std::shared_ptr<const GgufFile> gguf_;
  std::vector<std::shared_ptr<const SafetensorsFile>> shards_;
  std::map<std::string, Tensor> tensors_;
  std::vector<std::span<const uint8_t>> repacked_bytes_;  // RepackSummary::repacked_bytes
  std::string origin_;
  std::string repack_summary_;
};

}  // namespace lm
