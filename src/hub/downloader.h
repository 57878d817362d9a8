// Fetches blobs into the cache, a few files at a time: each into blobs/{etag}.incomplete
// (resumed with a Range request when a previous try or run left one), retried on network errors
// and 5xx, checked against its sha256 (LFS) or git blob sha1, synced, renamed to blobs/{etag} and
// only then linked into snapshots/{commit}. A failed file leaves at most its .incomplete behind.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "hub/hub_options.h"
#include "hub/repo_cache.h"

namespace lm::hub {

struct BlobDownload {
  std::string file;  // name in the repository
  std::string url;   // the resolve URL at the commit
  std::string etag;  // the blob's name: sha256 (LFS) or git sha1
  bool lfs = false;
  std::optional<uint64_t> size;
};

struct DownloadTarget {
  const RepoCache* cache = nullptr;
  std::string endpoint;  // for the model page named in a gated-repo error
  std::string repo_id;
  std::string revision;  // for messages
  std::string commit;
};

Status download_files(const DownloadTarget& target, const std::vector<BlobDownload>& files,
                      const HubOptions& options);

// "h:mm:ss", as Python's str(timedelta) of whole seconds (TGI's "Downloaded ... in 0:00:03.").
std::string format_duration(double seconds);

// A text progress bar of `width` cells for a fraction in [0, 1] (clamped): "[#####.....]".
std::string progress_bar(double fraction, int width);

}  // namespace lm::hub
