#include "hub/digest.h"

#include <openssl/evp.h>

#include <cstdio>
#include <string>
#include <vector>

namespace lm::hub {

struct Digest::State {
  EVP_MD_CTX* ctx = nullptr;
};

Digest::Digest(DigestKind kind, uint64_t size) : state_(std::make_unique<State>()) {
  state_->ctx = EVP_MD_CTX_new();
  LM_CHECK(state_->ctx != nullptr);
  const EVP_MD* md = kind == DigestKind::kSha256 ? EVP_sha256() : EVP_sha1();
  LM_CHECK(EVP_DigestInit_ex(state_->ctx, md, nullptr) == 1);
  if (kind == DigestKind::kGitBlobSha1) {
    const std::string header = "blob " + std::to_string(size);
    update(header.data(), header.size() + 1);  // with the terminating NUL, as git writes it
  }
}

Digest::~Digest() { EVP_MD_CTX_free(state_->ctx); }

void Digest::update(const void* data, size_t size) {
  LM_CHECK(EVP_DigestUpdate(state_->ctx, data, size) == 1);
}

std::string Digest::hex() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  LM_CHECK(EVP_DigestFinal_ex(state_->ctx, md, &length) == 1);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < length; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 15];
  }
  return out;
}

std::string sha256_hex(std::string_view bytes) {
  Digest d(DigestKind::kSha256, bytes.size());
  d.update(bytes.data(), bytes.size());
  return d.hex();
}

std::string git_blob_sha1_hex(std::string_view bytes) {
  Digest d(DigestKind::kGitBlobSha1, bytes.size());
  d.update(bytes.data(), bytes.size());
  return d.hex();
}

Result<std::string> file_digest_hex(const std::string& path, DigestKind kind) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return Error{"cannot open " + path + " to check its digest"};
  std::fseek(f, 0, SEEK_END);
  const long size = std::ftell(f);
  std::fseek(f, 0, SEEK_SET);
  Digest d(kind, size < 0 ? 0 : static_cast<uint64_t>(size));
  std::vector<char> buffer(1 << 20);
  size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), f)) > 0) d.update(buffer.data(), n);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return Error{"cannot read " + path + " to check its digest"};
  return d.hex();
}

}  // namespace lm::hub
