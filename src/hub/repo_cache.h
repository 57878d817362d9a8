// One repository's folder in the huggingface_hub cache, laid out exactly as the Python library
// lays it out, so either side reads what the other wrote:
//   models--{org}--{name}/refs/{revision}            commit sha, no newline
//   models--{org}--{name}/blobs/{etag}[.incomplete]  sha256 (LFS) or git sha1 (regular file)
//   models--{org}--{name}/snapshots/{commit}/{file}  relative symlink ../../blobs/{etag}
//   .locks/models--{org}--{name}/{etag}.lock         flock()ed while a blob is written
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace lm::hub {

// "org/name" -> "models--org--name".
std::string repo_folder_name(std::string_view repo_id);
bool is_commit_hash(std::string_view revision);  // 40 lowercase hex digits
// huggingface_hub's repo id rules: [org/]name of [A-Za-z0-9_.-], no "--" or "..", <= 96 chars.
bool is_valid_repo_id(std::string_view repo_id);
// A revision or file name becomes a path under refs/ or snapshots/: refuse "..", absolute paths
// and empty components. Etags must be plain [A-Za-z0-9._-] names.
Status check_relative_name(std::string_view what, std::string_view name);
Status check_etag(std::string_view etag);

class RepoCache {
 public:
  RepoCache(const std::string& cache_dir, std::string_view repo_id);

  const std::string& dir() const { return dir_; }
  std::string blob_path(const std::string& etag) const;
  std::string incomplete_path(const std::string& etag) const;
  std::string lock_path(const std::string& etag) const;
  std::string snapshot_dir(const std::string& commit) const;
  std::string snapshot_path(const std::string& commit, const std::string& file) const;

  // refs/{revision} -> commit; nullopt when absent or not a commit hash.
  std::optional<std::string> read_ref(const std::string& revision) const;
  // A commit hash is itself; a branch or tag goes through refs/.
  std::optional<std::string> resolve_revision(const std::string& revision) const;
  // Written through a synced temporary file and a rename, without a newline (huggingface_hub
  // reads the file verbatim).
  Status write_ref(const std::string& revision, const std::string& commit) const;
  // snapshots/{commit}/{file} -> ../../blobs/{etag} (one more ../ per folder level in `file`).
  Status link_snapshot_file(const std::string& commit, const std::string& file,
                            const std::string& etag) const;
  // The snapshot entry exists and resolves to a file (a dangling link counts as missing).
  bool has_file(const std::string& commit, const std::string& file) const;

 private:
  std::string cache_dir_;
  std::string folder_;
  std::string dir_;
};

}  // namespace lm::hub
