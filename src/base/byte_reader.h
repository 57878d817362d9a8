// A bounds-checked little-endian cursor over untrusted bytes (GGUF headers, safetensors
// headers). Every read checks the remaining length first, so a hostile file yields an Error.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>

#include "base/result.h"

namespace lm {

class ByteReader {
 public:
  explicit ByteReader(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  size_t offset() const { return offset_; }
  size_t remaining() const { return bytes_.size() - offset_; }

  template <typename T>
  Result<T> read() {
    static_assert(std::is_trivially_copyable_v<T>);
    if (remaining() < sizeof(T)) return truncated(sizeof(T));
    T value;
    std::memcpy(&value, bytes_.data() + offset_, sizeof(T));
    offset_ += sizeof(T);
    return value;
  }

  // Reads `length` bytes as a string; `length` is checked against what is left.
  Result<std::string> read_string(uint64_t length) {
    if (length > remaining()) return truncated(length);
    std::string s(reinterpret_cast<const char*>(bytes_.data() + offset_), length);
    offset_ += length;
    return s;
  }

  Status skip(uint64_t length) {
    if (length > remaining()) return truncated(length);
    offset_ += length;
    return {};
  }

 private:
  Error truncated(uint64_t wanted) const {
    return Error{"truncated: needs " + std::to_string(wanted) + " bytes at offset " +
                 std::to_string(offset_) + " but only " + std::to_string(remaining()) + " remain"};
  }

  std::span<const uint8_t> bytes_;
  size_t offset_ = 0;
};

}  // namespace lm
