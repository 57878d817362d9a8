// An exclusive flock() on a file, held for the life of the object: a second process (a replica on
// a shared cache volume) that asks for it waits. The kernel drops it when its holder dies, so a
// kill -9 never leaves a stale lock behind.
#pragma once

#include <functional>
#include <string>

#include "base/result.h"

namespace lm {

class FileLock {
 public:
  // Opens `path` (created empty, with its folder, when `create`) and waits for the lock, calling
  // `on_wait` first when another process holds it.
  static Result<FileLock> acquire(const std::string& path, bool create,
                                  const std::function<void()>& on_wait = nullptr);

  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&&) = delete;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();  // releases the lock

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace lm
