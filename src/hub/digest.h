// Content digests the Hub names files by: sha256 for LFS files (X-Linked-Etag) and the git blob
// sha1 (`sha1("blob {size}\0" + bytes)`, the ETag of a regular file). Both stream, so a download
// is checked while it is written.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"

namespace lm::hub {

enum class DigestKind { kSha256, kGitBlobSha1 };

class Digest {
 public:
  // `size` is the whole content's length; the git blob header needs it before the first byte.
  Digest(DigestKind kind, uint64_t size);
  ~Digest();
  Digest(const Digest&) = delete;
  Digest& operator=(const Digest&) = delete;

  void update(const void* data, size_t size);
  std::string hex();  // lowercase hex; ends the digest

 private:
  struct State;
  std::unique_ptr<State> state_;
};

std::string sha256_hex(std::string_view bytes);
std::string git_blob_sha1_hex(std::string_view bytes);

// The digest of a whole file (read in chunks).
Result<std::string> file_digest_hex(const std::string& path, DigestKind kind);

}  // namespace lm::hub
