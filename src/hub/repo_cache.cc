#include "hub/repo_cache.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <system_error>

#include "base/text_file.h"

namespace lm::hub {
namespace fs = std::filesystem;

std::string repo_folder_name(std::string_view repo_id) {
  std::string out = "models--";
  for (char c : repo_id) {
    if (c == '/') {
      out += "--";
    } else {
      out += c;
    }
  }
  return out;
}

bool is_commit_hash(std::string_view revision) {
  if (revision.size() != 40) return false;
  for (char c : revision) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool is_valid_repo_id(std::string_view repo_id) {
  const size_t slash = repo_id.find('/');
  if (slash != std::string_view::npos && repo_id.find('/', slash + 1) != std::string_view::npos)
    return false;
  const std::string_view name =
      slash == std::string_view::npos ? repo_id : repo_id.substr(slash + 1);
  if (name.empty() || name.size() > 96 || slash == 0) return false;
  if (repo_id.find("--") != std::string_view::npos) return false;
  if (repo_id.find("..") != std::string_view::npos) return false;
  if (repo_id.size() >= 4 && repo_id.substr(repo_id.size() - 4) == ".git") return false;
  for (std::string_view part :
       {repo_id.substr(0, slash == std::string_view::npos ? 0 : slash), name}) {
    if (part.empty()) continue;
    // huggingface_hub's \b[\w\-.]+\b: word characters at both ends.
    for (char c : part) {
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'))
        return false;
    }
    auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
    if (!word(part.front()) || !word(part.back())) return false;
  }
  return true;
}

Status check_relative_name(std::string_view what, std::string_view name) {
  auto bad = [&] { return Error{"unsafe " + std::string(what) + " '" + std::string(name) + "'"}; };
  if (name.empty() || name.front() == '/' || name.find('\\') != std::string_view::npos ||
      name.find('\0') != std::string_view::npos) {
    return bad();
  }
  size_t start = 0;
  while (start <= name.size()) {
    const size_t end = std::min(name.find('/', start), name.size());
    const std::string_view part = name.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return bad();
    start = end + 1;
  }
  return {};
}

Status check_etag(std::string_view etag) {
  if (etag.empty() || etag.size() > 128 || etag.front() == '.')
    return Error{"unexpected etag '" + std::string(etag) + "' from the Hub"};
  for (char c : etag) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'))
      return Error{"unexpected etag '" + std::string(etag) + "' from the Hub"};
  }
  return {};
}

RepoCache::RepoCache(const std::string& cache_dir, std::string_view repo_id)
    : cache_dir_(cache_dir), folder_(repo_folder_name(repo_id)), dir_(cache_dir + "/" + folder_) {}

std::string RepoCache::blob_path(const std::string& etag) const { return dir_ + "/blobs/" + etag; }

std::string RepoCache::incomplete_path(const std::string& etag) const {
  return blob_path(etag) + ".incomplete";
}

std::string RepoCache::lock_path(const std::string& etag) const {
  return cache_dir_ + "/.locks/" + folder_ + "/" + etag + ".lock";
}

std::string RepoCache::snapshot_dir(const std::string& commit) const {
  return dir_ + "/snapshots/" + commit;
}

std::string RepoCache::snapshot_path(const std::string& commit, const std::string& file) const {
  return snapshot_dir(commit) + "/" + file;
}

std::optional<std::string> RepoCache::read_ref(const std::string& revision) const {
  if (!check_relative_name("revision", revision).ok()) return std::nullopt;
  const std::string path = dir_ + "/refs/" + revision;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return std::nullopt;
  auto text = read_text_file(path, 4096);
  if (!text.ok()) return std::nullopt;
  std::string commit = *text;
  while (!commit.empty() && std::isspace(static_cast<unsigned char>(commit.back())))
    commit.pop_back();
  if (!is_commit_hash(commit)) return std::nullopt;
  return commit;
}

std::optional<std::string> RepoCache::resolve_revision(const std::string& revision) const {
  if (is_commit_hash(revision)) return revision;
  return read_ref(revision);
}

Status RepoCache::write_ref(const std::string& revision, const std::string& commit) const {
  LM_RETURN_IF_ERROR(check_relative_name("revision", revision));
  if (read_ref(revision) == commit) return {};
  const fs::path path = fs::path(dir_) / "refs" / revision;
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) return Error{"cannot create " + path.parent_path().string() + ": " + ec.message()};
  // The temporary name lives outside refs/ so a concurrent scan never sees it as a ref.
  return write_text_file_atomically(path.string(), commit,
                                    dir_ + "/.ref-" + std::to_string(::getpid()) + ".tmp");
}

Status RepoCache::link_snapshot_file(const std::string& commit, const std::string& file,
                                     const std::string& etag) const {
  LM_RETURN_IF_ERROR(check_relative_name("file name", file));
  LM_RETURN_IF_ERROR(check_etag(etag));
  const fs::path link = snapshot_path(commit, file);
  std::string target;
  for (size_t depth = 2 + static_cast<size_t>(std::count(file.begin(), file.end(), '/')); depth > 0;
       --depth) {
    target += "../";
  }
  target += "blobs/" + etag;
  std::error_code ec;
  fs::create_directories(link.parent_path(), ec);
  if (ec) return Error{"cannot create " + link.parent_path().string() + ": " + ec.message()};
  if (fs::is_symlink(link, ec) && fs::read_symlink(link, ec) == target) return {};
  // A new link under a temporary name, renamed over any stale entry.
  const fs::path tmp = link.string() + ".lm-link-" + std::to_string(::getpid());
  fs::remove(tmp, ec);
  fs::create_symlink(target, tmp, ec);
  if (ec) return Error{"cannot create the symlink " + link.string() + ": " + ec.message()};
  fs::rename(tmp, link, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return Error{"cannot create the symlink " + link.string() + ": " + ec.message()};
  }
  return {};
}

bool RepoCache::has_file(const std::string& commit, const std::string& file) const {
  if (!check_relative_name("file name", file).ok()) return false;
  std::error_code ec;
  return fs::is_regular_file(snapshot_path(commit, file), ec);
}

}  // namespace lm::hub
