#include "hub/model_info.h"

#include <nlohmann/json.hpp>

#include "hub/repo_cache.h"

namespace lm::hub {
namespace {

std::optional<std::string> string_field(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

std::optional<uint64_t> size_field(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_unsigned()) return std::nullopt;
  return it->get<uint64_t>();
}

}  // namespace

const RepoFile* HubModelInfo::find(std::string_view name) const {
  for (const RepoFile& f : files) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::vector<std::string> HubModelInfo::file_names() const {
  std::vector<std::string> names;
  names.reserve(files.size());
  for (const RepoFile& f : files) names.push_back(f.name);
  return names;
}

Result<HubModelInfo> parse_model_info(std::string_view json) {
  nlohmann::json doc = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object())
    return Error{"the Hub's model info is not a JSON object"};
  HubModelInfo info;
  info.id = string_field(doc, "id").value_or("");
  info.sha = string_field(doc, "sha").value_or("");
  if (!is_commit_hash(info.sha))
    return Error{"the Hub's model info has no commit sha (\"sha\": \"" + info.sha + "\")"};
  info.pipeline_tag = string_field(doc, "pipeline_tag");
  auto siblings = doc.find("siblings");
  if (siblings == doc.end() || !siblings->is_array())
    return Error{"the Hub's model info has no file list (\"siblings\")"};
  for (const nlohmann::json& s : *siblings) {
    if (!s.is_object()) continue;
    auto name = string_field(s, "rfilename");
    if (!name) continue;
    RepoFile f;
    f.name = *name;
    f.size = size_field(s, "size");
    f.etag = string_field(s, "blobId");
    auto lfs = s.find("lfs");
    if (lfs != s.end() && lfs->is_object()) {
      f.lfs = true;
      f.etag = string_field(*lfs, "sha256");
      if (auto size = size_field(*lfs, "size")) f.size = size;
    }
    info.files.push_back(std::move(f));
  }
  return info;
}

std::string normalize_etag(std::string_view etag) {
  if (etag.rfind("W/", 0) == 0) etag.remove_prefix(2);
  while (!etag.empty() && etag.front() == '"') etag.remove_prefix(1);
  while (!etag.empty() && etag.back() == '"') etag.remove_suffix(1);
  return std::string(etag);
}

std::string url_quote(std::string_view s, std::string_view safe) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                            (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-' ||
                            c == '~' || safe.find(ch) != std::string_view::npos;
    if (unreserved) {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string model_info_url(const std::string& endpoint, const std::string& repo_id,
                           const std::string& revision) {
  return endpoint + "/api/models/" + repo_id + "/revision/" + url_quote(revision, "") +
         "?blobs=True";  // as huggingface_hub sends it
}

std::string resolve_url(const std::string& endpoint, const std::string& repo_id,
                        const std::string& revision, const std::string& file) {
  return endpoint + "/" + repo_id + "/resolve/" + url_quote(revision, "") + "/" +
         url_quote(file, "/");
}

}  // namespace lm::hub
