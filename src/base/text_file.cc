#include "base/text_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace lm {

Result<std::string> read_text_file(const std::string& path, uint64_t max_bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Error{path + ": cannot open: " + std::strerror(errno)};
  if (!S_ISREG(st.st_mode)) return Error{path + ": not a regular file"};
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    return Error{path + ": file is " + std::to_string(st.st_size) + " bytes, more than the " +
                 std::to_string(max_bytes) + " allowed"};
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{path + ": cannot open"};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

Status write_text_file_atomically(const std::string& path, std::string_view text,
                                  const std::string& tmp_path) {
  const std::string tmp = tmp_path.empty() ? path + ".tmp" : tmp_path;
  // O_NOFOLLOW: never write through a link someone left at the temporary name.
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return Error{"cannot create " + tmp + ": " + std::strerror(errno)};
  int err = 0;
  for (size_t done = 0; done < text.size() && err == 0;) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n == 0 || errno != EINTR) {
      err = n == 0 ? EIO : errno;
    }
  }
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    return Error{"cannot write " + path + ": " + std::strerror(err)};
  }
  return {};
}

}  // namespace lm
