// The Hub's answer to GET {endpoint}/api/models/{repo}/revision/{revision}?blobs=True (what
// huggingface_hub's model_info(files_metadata=True) asks): the commit, the pipeline tag and,
// per file, the size and the etag that names its blob in the cache.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace lm::hub {

struct RepoFile {
  std::string name;                 // rfilename
  std::optional<uint64_t> size;     // the real size (the LFS object's for LFS files)
  std::optional<std::string> etag;  // lfs.sha256 for LFS files, else blobId (git sha1)
  bool lfs = false;
};

struct HubModelInfo {
  std::string id;
  std::string sha;  // the commit the revision resolved to
  std::optional<std::string> pipeline_tag;
  std::vector<RepoFile> files;

  const RepoFile* find(std::string_view name) const;
  std::vector<std::string> file_names() const;
};

Result<HubModelInfo> parse_model_info(std::string_view json);

// {endpoint}/api/models/{repo}/revision/{quoted revision}?blobs=True
std::string model_info_url(const std::string& endpoint, const std::string& repo_id,
                           const std::string& revision);
// {endpoint}/{repo}/resolve/{quoted revision}/{quoted file}
std::string resolve_url(const std::string& endpoint, const std::string& repo_id,
                        const std::string& revision, const std::string& file);
// An ETag header as a blob name: W/ prefix and quotes removed (huggingface_hub's _normalize_etag).
std::string normalize_etag(std::string_view etag);
// Percent-encoding as Python's urllib.parse.quote(s, safe=`safe`).
std::string url_quote(std::string_view s, std::string_view safe);

}  // namespace lm::hub
