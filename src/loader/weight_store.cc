#include "loader/weight_store.h"

#include "base/mapped_file.h"
#include "base/text_file.h"
#include "loader/gguf_file.h"
#include "loader/quantized_checkpoint.h"
#include "loader/safetensors_file.h"
#include "loader/safetensors_index.h"

namespace lm {

WeightStore::WeightStore() = default;
WeightStore::WeightStore(WeightStore&&) noexcept = default;
WeightStore& WeightStore::operator=(WeightStore&&) noexcept = default;
WeightStore::~WeightStore() = default;

const Tensor* WeightStore::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

void WeightStore::drop_pages(const void* p, size_t bytes) const {
  if (gguf_ != nullptr) return gguf_->drop_pages(p, bytes);
  for (const auto& shard : shards_) {
    if (shard->contains(p, bytes)) return shard->drop_pages(p, bytes);
  }
  // Not in a file: a weight the load repacked (GPTQ/AWQ/compressed-tensors) into memory the store
  // owns. Held until the store goes, it would double the resident size of a model whose
  // weights are copied (prepared for the CPU): its pages go back now.
  const auto* first = static_cast<const uint8_t*>(p);
  for (const std::span<const uint8_t> r : repacked_bytes_) {
    if (first >= r.data() && first + bytes <= r.data() + r.size())
      return drop_whole_pages(p, bytes);
  }
}

WeightStore WeightStore::from_gguf(std::shared_ptr<const GgufFile> gguf) {
  WeightStore store;
  store.origin_ = gguf->path();
  for (const GgufTensorInfo& info : gguf->tensor_infos())
    store.tensors_.emplace(info.name, gguf->tensor(info));
  store.gguf_ = gguf;
  store.owners_.push_back(std::move(gguf));
  return store;
}

Result<WeightStore> WeightStore::from_hf_folder(
    const std::string& dir, const std::optional<QuantizationConfig>& quantization) {
  WeightStore store;
  store.origin_ = dir;
  const std::string single = dir + "/model.safetensors";
  const std::string index_path = dir + "/model.safetensors.index.json";
  std::vector<std::string> shard_names;
  std::optional<SafetensorsIndex> index;
  if (file_exists(index_path)) {
    LM_ASSIGN_OR_RETURN(std::string text, read_text_file(index_path, 64ull << 20));
    LM_ASSIGN_OR_RETURN(SafetensorsIndex parsed, parse_safetensors_index(text, index_path));
    shard_names = parsed.shard_names;
    index = std::move(parsed);
  } else if (file_exists(single)) {
    shard_names.push_back("model.safetensors");
  } else {
    return Error{dir +
                 ": no model.safetensors or model.safetensors.index.json (only safetensors "
                 "weights are supported here)"};
  }

  for (const std::string& shard : shard_names) {
    LM_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(dir + "/" + shard));
    auto owned = std::make_shared<SafetensorsFile>(std::move(file));
    for (const auto& [name, tensor] : owned->tensors()) {
      if (index) {
        auto it = index->weight_map.find(name);
        if (it == index->weight_map.end() || it->second != shard) continue;  // not indexed here
      }
      if (!store.tensors_.emplace(name, tensor).second) {
        return Error{dir + ": tensor '" + name + "' appears in more than one shard"};
      }
    }
    store.shards_.push_back(owned);
    store.owners_.push_back(std::move(owned));
  }
  if (index) {
    for (const auto& [name, shard] : index->weight_map) {
      if (store.find(name) == nullptr) {
        return Error{index_path + ": tensor '" + name + "' is listed for " + shard +
                     " but that shard does not contain it"};
      }
    }
  }
  if (quantization) {
    const WeightStore& files = store;
    LM_ASSIGN_OR_RETURN(
        RepackSummary summary,
        repack_quantized_linears(
            *quantization, store.tensors_, store.owners_, [&files](const Tensor& t) {
              const auto bytes = dtype_bytes(t.dtype, static_cast<uint64_t>(t.numel()));
              if (bytes) files.drop_pages(t.data, static_cast<size_t>(*bytes));
            }));
    store.repack_summary_ = std::move(summary.text);
    store.repacked_bytes_ = std::move(summary.repacked_bytes);
  } else {
    for (const auto& [name, tensor] : store.tensors_) {
      if (name.ends_with(".qweight") || name.ends_with(".weight_packed") || is_fp8(tensor.dtype)) {
        return Error{dir + ": tensor '" + name +
                     "' is stored quantized, but config.json has no quantization_config"};
      }
    }
  }
  return store;
}

}  // namespace lm
