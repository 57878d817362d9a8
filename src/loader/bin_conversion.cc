#include "loader/bin_conversion.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "base/file_lock.h"
#include "base/log.h"
#include "base/text_file.h"
#include "loader/safetensors_writer.h"
#include "loader/strided_gather.h"
#include "loader/torch_checkpoint.h"

namespace lm {
namespace {

namespace fs = std::filesystem;

constexpr const char* kBinIndex = "pytorch_model.bin.index.json";
constexpr const char* kSingleBin = "pytorch_model.bin";
constexpr const char* kSafetensorsIndex = "model.safetensors.index.json";
// A hostile pickle can name one large storage many times through distinct views (each written as
// its own copy), or expand one element into billions with stride 0; a real checkpoint's tensors
// take about its own size. Refuse output past this multiple of the input (plus slack).
constexpr uint64_t kMaxGrowth = 4;
constexpr uint64_t kGrowthSlackBytes = 64ull << 20;

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// True when the view covers its whole storage, in order: such a tensor *is* the storage.
bool covers_storage(const TorchTensor& t) {
  return t.storage_offset == 0 && t.is_contiguous() && t.num_bytes() == t.storage.size();
}

// Which names to drop as duplicates of another (see convert_bin_file).
std::map<std::string, std::string> find_aliases(const std::vector<TorchTensor>& tensors) {
  std::map<std::pair<std::string, std::vector<int64_t>>, std::vector<std::string>> groups;
  for (const TorchTensor& t : tensors) {
    if (covers_storage(t)) groups[{t.storage_key, t.shape}].push_back(t.name);
  }
  std::map<std::string, std::string> aliases;
  for (auto& [key, names] : groups) {
    if (names.size() < 2) continue;
    std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
      const bool a_head = ends_with(a, "lm_head.weight");
      const bool b_head = ends_with(b, "lm_head.weight");
      return a_head != b_head ? b_head : a < b;
    });
    for (size_t i = 1; i < names.size(); ++i) aliases[names[i]] = names[0];
  }
  return aliases;
}

bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name.find('/') == std::string::npos && name != "." && name != "..";
}

// A target is current when it exists and is at least as new as every source (stat follows the
// snapshot's symlinks to the blobs, whose times are the download times).
bool up_to_date(const fs::path& target, const std::vector<fs::path>& sources) {
  std::error_code ec;
  const auto target_time = fs::last_write_time(target, ec);
  if (ec) return false;
  for (const fs::path& source : sources) {
    const auto source_time = fs::last_write_time(source, ec);
    if (ec || source_time > target_time) return false;
  }
  return true;
}

bool starts_like_zip(const fs::path& path) {
  char magic[4] = {};
  std::ifstream in(path, std::ios::binary);
  in.read(magic, 4);
  return in.gcount() == 4 && magic[0] == 'P' && magic[1] == 'K' && magic[2] == 3 && magic[3] == 4;
}

// The shards named by pytorch_model.bin.index.json, and which tensors it puts in each.
struct BinIndex {
  std::vector<std::string> shards;  // sorted, unique
  std::map<std::string, std::string> weight_map;
};

Result<BinIndex> read_bin_index(const std::string& path) {
  LM_ASSIGN_OR_RETURN(std::string text, read_text_file(path, 64ull << 20));
  auto index = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (index.is_discarded() || !index.is_object() || !index.contains("weight_map") ||
      !index["weight_map"].is_object()) {
    return Error{path + ": not a checkpoint index (needs an object \"weight_map\")"};
  }
  BinIndex result;
  std::set<std::string> shards;
  for (const auto& [name, file] : index["weight_map"].items()) {
    if (!file.is_string()) return Error{path + ": weight_map['" + name + "'] is not a file name"};
    const auto shard = file.get<std::string>();
    if (!is_plain_file_name(shard) || !ends_with(shard, ".bin")) {
      return Error{path + ": shard name '" + shard + "' must be a plain *.bin file name"};
    }
    shards.insert(shard);
    result.weight_map.emplace(name, shard);
  }
  if (shards.empty()) return Error{path + ": weight_map is empty"};
  result.shards.assign(shards.begin(), shards.end());
  return result;
}

// Every *.bin in the folder that is a torch zip, with TGI's filter for non-weight files.
std::vector<std::string> find_loose_bins(const fs::path& folder) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    const std::string name = entry.path().filename().string();
    if (!ends_with(name, ".bin") || name.find("arguments") != std::string::npos ||
        name.find("args") != std::string::npos || name.find("training") != std::string::npos) {
      continue;
    }
    if (fs::is_regular_file(entry.path(), ec) && starts_like_zip(entry.path())) {
      names.push_back(name);
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

std::string safetensors_name_for_bin(const std::string& bin_name) {
  std::string stem =
      ends_with(bin_name, ".bin") ? bin_name.substr(0, bin_name.size() - 4) : bin_name;
  if (stem.rfind("pytorch_", 0) == 0) stem = stem.substr(8);
  return stem + ".safetensors";
}

Result<BinConversion> convert_bin_file(const std::string& bin_path,
                                       const std::string& safetensors_path, bool write) {
  LM_ASSIGN_OR_RETURN(TorchCheckpoint ckpt, TorchCheckpoint::open(bin_path));
  BinConversion result;
  result.aliases = find_aliases(ckpt.tensors());
  std::map<std::string, const TorchTensor*> by_name;
  std::vector<SafetensorsTensorSpec> specs;
  for (const TorchTensor& t : ckpt.tensors()) {
    if (result.aliases.count(t.name)) continue;
    by_name[t.name] = &t;
    specs.push_back({t.name, std::string(torch_dtype_info(t.dtype).safetensors_name), t.shape});
  }
  if (result.aliases.count("format")) {
    return Error{bin_path + ": a tensor named 'format' clashes with the safetensors metadata"};
  }
  std::map<std::string, std::string> metadata = result.aliases;
  metadata["format"] = "pt";
  LM_ASSIGN_OR_RETURN(SafetensorsLayout layout,
                      layout_safetensors(std::move(specs), metadata, safetensors_path));
  for (const SafetensorsTensorSpec& spec : layout.tensors) {
    result.tensor_names.push_back(spec.name);
  }
  result.data_bytes = layout.data_bytes;
  if (result.data_bytes > kMaxGrowth * ckpt.file_size() + kGrowthSlackBytes) {
    return Error{bin_path + ": its tensors would take " + std::to_string(result.data_bytes) +
                 " bytes as safetensors, far more than the " + std::to_string(ckpt.file_size()) +
                 "-byte checkpoint (views repeating one storage); refusing to convert"};
  }
  if (!write) return result;

  LM_ASSIGN_OR_RETURN(SafetensorsWriter writer,
                      SafetensorsWriter::create(safetensors_path, std::move(layout)));
  const ByteSink sink = [&](std::span<const uint8_t> bytes) { return writer.append(bytes); };
  for (const SafetensorsTensorSpec& spec : writer.tensors()) {
    const TorchTensor& t = *by_name.at(spec.name);
    LM_RETURN_IF_ERROR(gather_strided(t.first_element(), torch_dtype_info(t.dtype).element_bytes,
                                      t.shape, t.strides, sink));
  }
  LM_RETURN_IF_ERROR(writer.finish());
  return result;
}

Result<std::vector<std::string>> convert_bin_checkpoints(const std::string& folder) {
  const fs::path dir(folder);
  std::vector<std::string> bins;
  BinIndex bin_index;
  const bool indexed = file_exists((dir / kBinIndex).string());
  if (indexed) {
    LM_ASSIGN_OR_RETURN(bin_index, read_bin_index((dir / kBinIndex).string()));
    bins = bin_index.shards;
  } else if (file_exists((dir / kSingleBin).string())) {
    bins = {kSingleBin};
  } else {
    bins = find_loose_bins(dir);
  }
  if (bins.empty()) return Error{folder + ": no PyTorch .bin weights to convert"};

  std::vector<std::string> targets;
  std::vector<fs::path> all_sources;
  for (const std::string& bin : bins) {
    targets.push_back(safetensors_name_for_bin(bin));
    all_sources.push_back(dir / bin);
  }
  if (indexed) all_sources.push_back(dir / kBinIndex);
  if (std::set<std::string>(targets.begin(), targets.end()).size() != targets.size()) {
    return Error{folder + ": two .bin files map to the same safetensors name"};
  }
  // NOTE: launchers sharing the folder (replicas on one cache volume) convert one at a time:
  // each writes `<target>.tmp`, so two at once would truncate each other's. The lock is on the
  // first source (read-only is enough; a cache's is its blob), so no lock file joins the
  // snapshot; whoever waited finds the targets current below and writes nothing.
  LM_ASSIGN_OR_RETURN(FileLock lock,
                      FileLock::acquire(all_sources.front().string(), /*create=*/false, [&] {
                        log_info("Another process is converting the PyTorch weights in " + folder +
                                 "; waiting for it");
                      }));
  const bool needs_index = targets.size() > 1 || targets[0] != "model.safetensors";
  bool all_current = !needs_index || up_to_date(dir / kSafetensorsIndex, all_sources);
  for (size_t i = 0; i < bins.size(); ++i) {
    all_current = all_current && up_to_date(dir / targets[i], {dir / bins[i]});
  }
  if (all_current) return targets;

  nlohmann::json weight_map = nlohmann::json::object();
  uint64_t total_size = 0;
  for (size_t i = 0; i < bins.size(); ++i) {
    const std::string bin_path = (dir / bins[i]).string();
    const std::string target_path = (dir / targets[i]).string();
    // A current target is not rewritten, but its names are still needed for the index.
    const bool write = !up_to_date(target_path, {bin_path});
    if (!write && !needs_index) continue;
    LM_ASSIGN_OR_RETURN(BinConversion converted, convert_bin_file(bin_path, target_path, write));
    for (const std::string& name : converted.tensor_names) {
      if (weight_map.contains(name)) {
        return Error{folder + ": tensor '" + name + "' appears in more than one shard"};
      }
      weight_map[name] = targets[i];
    }
    total_size += converted.data_bytes;
    if (indexed) {
      // Hostile-input check: the old index must agree with what the shard really holds.
      const std::set<std::string> names(converted.tensor_names.begin(),
                                        converted.tensor_names.end());
      for (const auto& [name, shard] : bin_index.weight_map) {
        if (shard != bins[i] || names.count(name) || converted.aliases.count(name)) continue;
        return Error{folder + "/" + kBinIndex + ": tensor '" + name + "' is listed for " + shard +
                     " but that file does not contain it"};
      }
    }
  }
  if (needs_index) {
    nlohmann::json index = {{"metadata", {{"total_size", total_size}}},
                            {"weight_map", std::move(weight_map)}};
    LM_RETURN_IF_ERROR(
        write_text_file_atomically((dir / kSafetensorsIndex).string(), index.dump(2)));
  }
  return targets;
}

}  // namespace lm
