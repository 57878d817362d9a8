// A temp folder removed when the test ends, and small helpers to lay out cache trees in it the
// way huggingface_hub writes them.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace lm::hub::testing {

class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = (std::filesystem::temp_directory_path() /
             ("lm_hub_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++)))
                .string();
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline void write_file(const std::string& path, const std::string& bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace lm::hub::testing
