// PyTorch .bin weights to safetensors, converted once beside the originals the way TGI's launcher
// does it, so the rest of the server only ever maps safetensors. Nothing in a pickle runs (see
// restricted_unpickler.h), and conversion streams one tensor at a time.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/result.h"

namespace lm {

// TGI's name for the safetensors twin of a .bin file: the stem without a leading "pytorch_".
// "pytorch_model-00001-of-00002.bin" -> "model-00001-of-00002.safetensors".
std::string safetensors_name_for_bin(const std::string& bin_name);

// What one checkpoint became.
struct BinConversion {
  std::vector<std::string> tensor_names;       // written, in file order
  std::map<std::string, std::string> aliases;  // dropped duplicate name -> the name it equals
  uint64_t data_bytes = 0;                     // tensor bytes written
};

// Converts one torch.save checkpoint into `safetensors_path` (via `<path>.tmp`, renamed when
// complete). Tensors that are the very same view of a whole storage (tied weights such as
// lm_head.weight = model.embed_tokens.weight) are written once: safetensors cannot alias, and TGI
// and safetensors.torch.save_model drop such duplicates too, recording "dropped": "kept" in
// __metadata__. The name kept is the first in sorted order, except that a name ending in
// "lm_head.weight" is dropped in favour of any other (the Llama loader takes a missing lm_head
// from the embedding when tie_word_embeddings is set, which tied checkpoints declare). Views that
// share a storage any other way (slices, transposes) are written as separate contiguous copies.
// With `write` false nothing is written; the result says what would be.
Result<BinConversion> convert_bin_file(const std::string& bin_path,
                                       const std::string& safetensors_path, bool write = true);

// Converts the PyTorch weights of a model folder (a Hugging Face cache snapshot is fine: its
// files may be symlinks into ../../blobs; the new files are written as regular files in the
// folder itself). Finds, in this order: the shards named by pytorch_model.bin.index.json, else
// pytorch_model.bin, else every *.bin in the folder that is a torch zip (TGI's filter: names with
// "arguments", "args" or "training" are skipped). A target that exists and is at least as new as
// its .bin is kept, not rewritten. When there are several targets, or the one target is not
// model.safetensors, writes model.safetensors.index.json (weight_map and metadata.total_size) so
// WeightStore::from_hf_folder finds them. Processes converting one folder at once take turns (a
// lock on the first .bin), so replicas sharing a cache convert it once. Returns the safetensors
// file names, in shard order.
Result<std::vector<std::string>> convert_bin_checkpoints(const std::string& folder);

}  // namespace lm
