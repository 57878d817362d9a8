#include "hub/gguf_choice.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>

#include "hub/file_selection.h"

namespace lm::hub {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string_view base_name(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// gguf-split's "{prefix}-%05d-of-%05d.gguf": the prefix, the 1-based index and the count.
struct SplitName {
  std::string prefix;
  int index = 1;
  int count = 1;
};

std::optional<SplitName> split_name(std::string_view path) {
  constexpr std::string_view kTail = "-00000-of-00000.gguf";
  if (path.size() <= kTail.size()) return std::nullopt;
  const std::string_view tail = path.substr(path.size() - kTail.size());
  for (size_t i = 0; i < kTail.size(); ++i) {
    const bool digit = kTail[i] == '0';
    if (digit != (std::isdigit(static_cast<unsigned char>(tail[i])) != 0)) return std::nullopt;
    if (!digit && tail[i] != kTail[i]) return std::nullopt;
  }
  SplitName s;
  s.prefix = std::string(path.substr(0, path.size() - kTail.size()));
  std::from_chars(tail.data() + 1, tail.data() + 6, s.index);
  std::from_chars(tail.data() + 10, tail.data() + 15, s.count);
  if (s.index < 1 || s.count < 1 || s.index > s.count) return std::nullopt;
  return s;
}

std::string shard_name(const SplitName& s, int index) {
  return fmt::format("{}-{:05d}-of-{:05d}.gguf", s.prefix, index, s.count);
}

// llama.cpp's match: the tag followed by '.' or '-', anywhere in the path, case-insensitive.
bool has_quant_tag(std::string_view path, std::string_view tag) {
  const std::string p = upper(path), t = upper(tag);
  for (size_t at = p.find(t); at != std::string::npos; at = p.find(t, at + 1)) {
    const size_t next = at + t.size();
    if (next < p.size() && (p[next] == '.' || p[next] == '-')) return true;
  }
  return false;
}

bool is_later_shard(std::string_view path) {
  const auto s = split_name(path);
  return s && s->index != 1;
}

std::string gguf_listing(const std::vector<std::string>& files) {
  std::string out;
  for (const std::string& f : files) {
    if (ends_with(f, ".gguf")) out += (out.empty() ? "" : ", ") + f;
  }
  return out.empty() ? "none" : out;
}

}  // namespace

std::pair<std::string, std::optional<std::string>> split_quant_tag(std::string_view model_id) {
  const size_t colon = model_id.rfind(':');
  if (colon == std::string_view::npos) return {std::string(model_id), std::nullopt};
  const std::string_view tag = model_id.substr(colon + 1);
  return {std::string(model_id.substr(0, colon)),
          tag.empty() ? std::nullopt : std::optional<std::string>(tag)};
}

bool is_gguf_model_file(std::string_view path) {
  if (!ends_with(path, ".gguf")) return false;
  const std::string_view name = base_name(path);
  for (std::string_view not_a_model : {"mmproj", "imatrix", "mtp-", "eagle3-", "dflash-"}) {
    if (name.find(not_a_model) != std::string_view::npos) return false;
  }
  return true;
}

bool serves_gguf(const std::vector<std::string>& repo_files, const GgufRequest& request) {
  if (request.file || request.quant) return true;
  if (select_weight_files(repo_files).format == WeightFormat::kSafetensors) return false;
  return std::any_of(repo_files.begin(), repo_files.end(),
                     [](const std::string& f) { return is_gguf_model_file(f); });
}

Result<std::vector<std::string>> choose_gguf_files(std::vector<std::string> repo_files,
                                                   const GgufRequest& request,
                                                   std::string_view repo_id) {
  std::sort(repo_files.begin(), repo_files.end());
  const std::string listing = gguf_listing(repo_files);
  std::string chosen;
  if (request.file) {
    const std::string wanted = upper(*request.file);
    for (const std::string& f : repo_files) {
      if (upper(f) == wanted) {
        chosen = f;
        break;
      }
    }
    if (chosen.empty()) {
      return Error{fmt::format("--gguf-file {}: no such file in {} (its GGUF files: {})",
                               *request.file, repo_id, listing)};
    }
    if (!ends_with(chosen, ".gguf")) {
      return Error{fmt::format("--gguf-file {}: not a .gguf file (the GGUF files of {}: {})",
                               chosen, repo_id, listing)};
    }
    if (const auto s = split_name(chosen); s && s->index != 1) {
      return Error{
          fmt::format("--gguf-file {} is shard {} of {} of a split model: name the first shard, {}",
                      chosen, s->index, s->count, shard_name(*s, 1))};
    }
  } else {
    std::vector<std::string> tags;
    if (request.quant) {
      tags = {*request.quant};
    } else {
      tags = {"Q4_K_M", "Q8_0"};  // llama.cpp's defaults, in order
    }
    for (const std::string& tag : tags) {
      std::vector<std::string> matches;
      for (const std::string& f : repo_files) {
        if (is_gguf_model_file(f) && !is_later_shard(f) && has_quant_tag(f, tag))
          matches.push_back(f);
      }
      if (matches.size() > 1) {
        std::string names;
        for (const std::string& m : matches) names += (names.empty() ? "" : ", ") + m;
        return Error{fmt::format(
            "more than one GGUF file of {} matches the quant {}: {}; choose one with --gguf-file",
            repo_id, tag, names)};
      }
      if (matches.size() == 1) {
        chosen = matches.front();
        break;
      }
    }
    if (chosen.empty() && request.quant) {
      return Error{fmt::format("no GGUF file of {} matches the quant {} (its GGUF files: {})",
                               repo_id, *request.quant, listing)};
    }
    if (chosen.empty()) {  // as llama.cpp: the first model file
      for (const std::string& f : repo_files) {
        if (is_gguf_model_file(f) && !is_later_shard(f)) {
          chosen = f;
          break;
        }
      }
    }
    if (chosen.empty()) {
      return Error{fmt::format("{} has no GGUF model file (its GGUF files: {})", repo_id, listing)};
    }
  }
  const auto split = split_name(chosen);
  if (!split) return std::vector<std::string>{chosen};
  std::vector<std::string> shards;
  for (int i = 1; i <= split->count; ++i) {
    std::string name = shard_name(*split, i);
    if (!std::binary_search(repo_files.begin(), repo_files.end(), name)) {
      return Error{fmt::format("{} lacks {}, shard {} of {} of the split model {}", repo_id, name,
                               i, split->count, chosen)};
    }
    shards.push_back(std::move(name));
  }
  return shards;
}

}  // namespace lm::hub
