#include "hub/downloader.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>

#include "base/file_lock.h"
#include "base/log.h"
#include "hub/digest.h"
#include "hub/disk_space.h"
#include "hub/http_client.h"
#include "hub/hub_errors.h"

namespace lm::hub {
namespace {

using Clock = std::chrono::steady_clock;

// Shared by the workers and the thread that logs progress.
struct Progress {
  std::atomic<uint64_t> bytes_done{0};  // bytes on disk, counting resumed prefixes
  uint64_t bytes_total = 0;
  std::atomic<bool> cancel{false};
  std::mutex mutex;
  std::condition_variable changed;
  size_t next_file = 0;
  size_t files_done = 0;
  std::optional<Error> error;  // the first failure
};

bool sleep_unless_cancelled(std::chrono::milliseconds wait, const std::atomic<bool>& cancel) {
  const auto until = Clock::now() + wait;
  while (Clock::now() < until) {
    if (cancel.load()) return false;
    std::this_thread::sleep_for(
        std::min<Clock::duration>(until - Clock::now(), std::chrono::milliseconds(20)));
  }
  return !cancel.load();
}

bool write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// Hashes the first `size` bytes of an open file (the part a previous try left).
bool hash_prefix(int fd, uint64_t size, Digest& digest) {
  std::vector<char> buffer(1 << 20);
  uint64_t offset = 0;
  while (offset < size) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(buffer.size(), size - offset));
    const ssize_t n = ::pread(fd, buffer.data(), want, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    digest.update(buffer.data(), static_cast<size_t>(n));
    offset += static_cast<uint64_t>(n);
  }
  return true;
}

DigestKind digest_kind(const BlobDownload& f) {
  return f.lfs ? DigestKind::kSha256 : DigestKind::kGitBlobSha1;
}

// Only an etag of the digest's own length can be compared (the Hub's are).
bool etag_is_digest(const BlobDownload& f) {
  const size_t want = f.lfs ? 64 : 40;
  if (f.etag.size() != want) return false;
  for (char c : f.etag) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

class FileFetcher {
 public:
  FileFetcher(const DownloadTarget& target, const HubOptions& options, Progress& progress)
      : target_(target), options_(options), progress_(progress), http_(options) {}

  Status fetch(const BlobDownload& f) {
    const RepoCache& cache = *target_.cache;
    const std::string blob = cache.blob_path(f.etag);
    const std::string partial = cache.incomplete_path(f.etag);
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(blob).parent_path(), ec);
    if (ec) return Error{"cannot create " + cache.dir() + "/blobs: " + ec.message()};
    // The lock huggingface_hub's FileLock takes: .locks/.../{etag}.lock.
    LM_ASSIGN_OR_RETURN(FileLock lock, FileLock::acquire(cache.lock_path(f.etag), /*create=*/true));
    if (!std::filesystem::exists(blob, ec)) {
      log_info("Download file: " + f.file);
      const auto start = Clock::now();
      LM_RETURN_IF_ERROR(fetch_blob(f, partial));
      // Renamed only once verified: a blob under its final name is always complete.
      if (::rename(partial.c_str(), blob.c_str()) != 0)
        return Error{"cannot rename " + partial + ": " + std::strerror(errno)};
      LM_RETURN_IF_ERROR(cache.link_snapshot_file(target_.commit, f.file, f.etag));
      log_info(fmt::format(
          "Downloaded {} in {}.", cache.snapshot_path(target_.commit, f.file),
          format_duration(std::chrono::duration<double>(Clock::now() - start).count())));
      return {};
    }
    if (f.size) progress_.bytes_done += *f.size;
    return cache.link_snapshot_file(target_.commit, f.file, f.etag);
  }

 private:
  Status fetch_blob(const BlobDownload& f, const std::string& partial) {
    const int fd = ::open(partial.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return Error{"cannot open " + partial + ": " + std::strerror(errno)};
    struct Closer {
      int fd;
      ~Closer() { ::close(fd); }
    } closer{fd};
    uint64_t offset = static_cast<uint64_t>(::lseek(fd, 0, SEEK_END));
    if (f.size && offset > *f.size) offset = restart(fd);
    // The digest streams alongside the writes; a size-less git blob is hashed at the end.
    const bool stream_digest = etag_is_digest(f) && (f.lfs || f.size.has_value());
    std::unique_ptr<Digest> digest;
    if (stream_digest) {
      digest = std::make_unique<Digest>(digest_kind(f), f.size.value_or(0));
      if (offset > 0 && !hash_prefix(fd, offset, *digest))
        return Error{"cannot read " + partial + ": " + std::strerror(errno)};
    }
    if (offset > 0) {
      log_info(fmt::format("Resuming {} at byte {}{}", f.file, offset,
                           f.size ? fmt::format(" of {}", *f.size) : ""));
    }
    progress_.bytes_done += offset;

    const HubRequestContext context{target_.endpoint, target_.repo_id, target_.revision,
                                    f.file,           f.url,           options_.token.has_value()};
    std::string last_error;
    int write_errno = 0;  // of a failed write (curl may change errno before download returns)
    for (int attempt = 1; attempt <= options_.max_tries; ++attempt) {
      if (offset > 0 && f.size && offset == *f.size) break;  // a previous try got every byte
      const uint64_t start_offset = offset;
      auto sink = [&](long status, const char* data, size_t size) {
        if (status == 200 && offset > 0 && offset == start_offset && start_offset > 0) {
          // The server ignored the Range: start over.
          progress_.bytes_done -= offset;
          offset = restart(fd);
          if (digest) digest = std::make_unique<Digest>(digest_kind(f), f.size.value_or(0));
        }
        if (!write_all(fd, data, size)) {
          write_errno = errno != 0 ? errno : EIO;
          return false;
        }
        if (digest) digest->update(data, size);
        offset += size;
        progress_.bytes_done += size;
        return true;
      };
      auto response = http_.download(f.url, offset, sink, &progress_.cancel);
      if (progress_.cancel.load()) return Error{"cancelled"};
      if (write_errno != 0) {
        return Error{fmt::format("cannot write {}: {} (the part downloaded stays, to resume)",
                                 partial, std::strerror(write_errno))};
      }
      if (response.ok()) {
        const long status = response->status;
        if (status >= 200 && status < 300) {
          last_error.clear();
          break;
        }
        if (status == 416 && offset > 0) {  // the range starts past the end: start over
          progress_.bytes_done -= offset;
          offset = restart(fd);
          if (digest) digest = std::make_unique<Digest>(digest_kind(f), f.size.value_or(0));
          last_error = "416 Range Not Satisfiable";
          continue;
        }
        Error error = hub_http_error(*response, context);
        if (!is_retryable_status(status)) return error;
        last_error = error.message;
      } else {
        last_error = response.error().message;
      }
      if (attempt == options_.max_tries) break;
      const auto wait = options_.retry_backoff * (1 << (attempt - 1));
      log_warn(fmt::format("Download of {} failed ({}); try {}/{} in {} ms, resuming at byte {}",
                           f.file, last_error, attempt + 1, options_.max_tries, wait.count(),
                           offset));
      if (!sleep_unless_cancelled(wait, progress_.cancel)) return Error{"cancelled"};
    }
    if (!last_error.empty()) {
      return Error{fmt::format("Could not download {} from {} after {} tries: {}", f.file, f.url,
                               options_.max_tries, last_error)};
    }
    LM_RETURN_IF_ERROR(verify(f, partial, offset, digest.get()));
    // On disk before the caller renames it: after a crash, a blob under its final name must
    // never be shorter than what was verified (a later start takes it for complete).
    if (::fsync(fd) != 0) return Error{"cannot sync " + partial + ": " + std::strerror(errno)};
    return {};
  }

  Status verify(const BlobDownload& f, const std::string& partial, uint64_t size, Digest* digest) {
    auto fail = [&](const std::string& what) {
      ::unlink(partial.c_str());
      return Error{fmt::format(
          "Integrity check failed for {} of {}: {}. The partial file was deleted; start again "
          "to download it anew (if this repeats, the file on the Hub or a proxy on the way is "
          "corrupt).",
          f.file, target_.repo_id, what)};
    };
    if (f.size && size != *f.size)
      return fail(fmt::format("the Hub lists {} bytes but {} arrived", *f.size, size));
    if (!etag_is_digest(f)) return {};  // nothing to compare against
    std::string actual;
    if (digest != nullptr) {
      actual = digest->hex();
    } else {
      auto computed = file_digest_hex(partial, digest_kind(f));
      if (!computed.ok()) return computed.error();
      actual = *computed;
    }
    if (actual != f.etag) {
      return fail(fmt::format("the Hub says its {} is {} but the downloaded bytes give {}",
                              f.lfs ? "sha256" : "git blob sha1", f.etag, actual));
    }
    return {};
  }

  static uint64_t restart(int fd) {
    if (::ftruncate(fd, 0) != 0) return 0;
    ::lseek(fd, 0, SEEK_SET);
    return 0;
  }

  const DownloadTarget& target_;
  const HubOptions& options_;
  Progress& progress_;
  HttpClient http_;
};

void log_progress(Progress& p, Clock::time_point start, size_t num_files) {
  const uint64_t done = p.bytes_done.load();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  const double rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0;
  std::string line;
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    line = fmt::format("Download: [{}/{}]", p.files_done, num_files);
  }
  double pct = 0;
  if (p.bytes_total > 0) {
    pct = std::min(100.0, 100.0 * static_cast<double>(done) / static_cast<double>(p.bytes_total));
    const double eta =
        rate > 0 && p.bytes_total > done ? static_cast<double>(p.bytes_total - done) / rate : 0;
    line += fmt::format(" {:.1f}% ({} / {}), {}/s -- ETA: {}", pct, format_bytes(done),
                        format_bytes(p.bytes_total), format_bytes(static_cast<uint64_t>(rate)),
                        format_duration(eta));
  }
  // On a terminal a bar redrawn in place; in logs (files, containers) one line per interval.
  if (::isatty(STDOUT_FILENO) && ::isatty(STDERR_FILENO)) {
    std::fprintf(stderr, "\r%s %s\x1b[K", progress_bar(pct / 100.0, 30).c_str(), line.c_str());
    std::fflush(stderr);
    return;
  }
  log_info(line);
}

}  // namespace

std::string progress_bar(double fraction, int width) {
  const double f = std::clamp(fraction, 0.0, 1.0);
  const int filled = static_cast<int>(f * width + 0.5);
  return "[" + std::string(static_cast<size_t>(filled), '#') +
         std::string(static_cast<size_t>(width - filled), '.') + "]";
}

std::string format_duration(double seconds) {
  const auto total = static_cast<int64_t>(seconds < 0 ? 0 : seconds);
  return fmt::format("{}:{:02}:{:02}", total / 3600, total / 60 % 60, total % 60);
}

Status download_files(const DownloadTarget& target, const std::vector<BlobDownload>& files,
                      const HubOptions& options) {
  if (files.empty()) return {};
  Progress progress;
  for (const BlobDownload& f : files) progress.bytes_total += f.size.value_or(0);
  const size_t num_workers = std::min<size_t>(
      files.size(), static_cast<size_t>(std::max(1, options.max_parallel_downloads)));
  std::vector<std::thread> workers;
  for (size_t w = 0; w < num_workers; ++w) {
    workers.emplace_back([&] {
      FileFetcher fetcher(target, options, progress);
      for (;;) {
        size_t idx = 0;
        {
          std::lock_guard<std::mutex> lock(progress.mutex);
          if (progress.next_file == files.size() || progress.error) return;
          idx = progress.next_file++;
        }
        Status s = fetcher.fetch(files[idx]);
        std::lock_guard<std::mutex> lock(progress.mutex);
        ++progress.files_done;
        if (!s.ok() && !progress.error) {
          progress.error = s.error();
          progress.cancel = true;  // the others stop; their .incomplete files stay resumable
        }
        progress.changed.notify_all();
      }
    });
  }
  const auto start = Clock::now();
  {
    std::unique_lock<std::mutex> lock(progress.mutex);
    while (progress.files_done < files.size() && !progress.error) {
      if (progress.changed.wait_for(lock, options.progress_interval) == std::cv_status::timeout) {
        lock.unlock();
        log_progress(progress, start, files.size());
        lock.lock();
      }
    }
  }
  for (std::thread& t : workers) t.join();
  if (::isatty(STDOUT_FILENO) && ::isatty(STDERR_FILENO)) {
    log_progress(progress, start, files.size());  // the final state of the bar, then a newline
    std::fputc('\n', stderr);
  }
  if (progress.error) return *progress.error;
  return {};
}

}  // namespace lm::hub
