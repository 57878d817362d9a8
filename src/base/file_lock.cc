#include "base/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

namespace lm {

Result<FileLock> FileLock::acquire(const std::string& path, bool create,
                                   const std::function<void()>& on_wait) {
  if (create) {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  }
  const int fd = create ? ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)
                        : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error{"cannot open " + path + " to lock it: " + std::strerror(errno)};
  int how = LOCK_EX | LOCK_NB;
  while (::flock(fd, how) != 0) {
    if (errno == EINTR) continue;
    if (errno == EWOULDBLOCK && how != LOCK_EX) {
      if (on_wait) on_wait();
      how = LOCK_EX;
      continue;
    }
    const int err = errno;
    ::close(fd);
    return Error{"cannot lock " + path + ": " + std::strerror(err)};
  }
  return FileLock(fd);
}

FileLock::FileLock(FileLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace lm
