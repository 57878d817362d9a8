// Builders for small GGUF and safetensors files in a temp folder, so loader tests can corrupt
// exactly one field at a time.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace lm::testing {

class Bytes {
 public:
  template <typename T>
  Bytes& put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    data.insert(data.end(), p, p + sizeof(T));
    return *this;
  }
  Bytes& str(const std::string& s) {
    put<uint64_t>(s.size());
    data.insert(data.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& raw(const std::string& s) {
    data.insert(data.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& pad_to(size_t alignment) {
    while (data.size() % alignment) data.push_back(0);
    return *this;
  }
  std::vector<uint8_t> data;
};

// A temp file that is removed when the test ends.
class TempFile {
 public:
  explicit TempFile(const std::vector<uint8_t>& bytes, const std::string& suffix = ".bin") {
    static int counter = 0;
    path_ = (std::filesystem::temp_directory_path() /
             ("lm_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + suffix))
                .string();
    std::ofstream(path_, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
  }
  ~TempFile() { std::filesystem::remove(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace lm::testing
