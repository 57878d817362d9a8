// A read-only memory mapping of a whole file: model weights stay in the page cache instead of
// being copied into the heap. Move-only; unmaps on destruction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "base/result.h"

namespace lm {

class MappedFile {
 public:
  static Result<MappedFile> open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

  // Takes the pages that lie wholly inside [p, p + bytes), which must be part of this mapping
  // (checked), out of the process's resident memory (madvise DONTNEED): for data that was copied
  // elsewhere. The mapping is read-only and private, so nothing is lost: it stays valid and a
  // later read brings the pages back from the file.
  void drop_pages(const void* p, size_t bytes) const;

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// madvise DONTNEED on the pages wholly inside [p, p + bytes) (advice: a failure leaves them
// resident). Read again, a private file mapping's pages come back from the file and anonymous
// memory's as zeros: only for bytes that were copied elsewhere and are not read again.
void drop_whole_pages(const void* p, size_t bytes);

}  // namespace lm
