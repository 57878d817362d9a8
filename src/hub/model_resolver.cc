#include "hub/model_resolver.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <thread>

#include "base/log.h"
#include "base/text_file.h"
#include "hub/cached_snapshot.h"
#include "hub/disk_space.h"
#include "hub/downloader.h"
#include "hub/file_selection.h"
#include "hub/gguf_choice.h"
#include "hub/http_client.h"
#include "hub/hub_errors.h"
#include "hub/model_info.h"
#include "hub/repo_cache.h"

namespace lm::hub {
namespace {

namespace fs = std::filesystem;

constexpr const char* kAlreadyPresent = "Files are already present on the host. Skipping download.";

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

bool looks_like_path(const std::string& id) {
  return id.empty() || id.front() == '/' || id.front() == '.' || id.front() == '~' ||
         (id.size() > 5 && id.substr(id.size() - 5) == ".gguf");
}

std::vector<std::string> in_folder(const std::string& dir, const std::vector<std::string>& names) {
  std::vector<std::string> paths;
  for (const std::string& name : names) paths.push_back(dir + "/" + name);
  return paths;
}

// The GGUF file to load from a folder of the cache (or WEIGHTS_CACHE_OVERRIDE), once every file
// it needs (each shard of a split model) is there.
Result<std::string> gguf_in_folder(const std::string& dir, const GgufRequest& gguf,
                                   const std::string& repo_id, const std::string& why) {
  const SnapshotFiles files = snapshot_files(dir);
  LM_ASSIGN_OR_RETURN(std::vector<std::string> wanted,
                      choose_gguf_files(files.listed, gguf, repo_id));
  std::vector<std::string> missing;
  for (const std::string& name : wanted) {
    if (!std::binary_search(files.present.begin(), files.present.end(), name))
      missing.push_back(name);
  }
  if (!missing.empty())
    return Error{fmt::format("{}, and {} is missing: {}.", why, dir, join(missing))};
  return dir + "/" + wanted.front();
}

// A request retried on network errors, 429 and 5xx; any other answer is returned as is.
Result<HttpResponse> with_retries(const std::function<Result<HttpResponse>()>& send,
                                  const HubOptions& options, const std::string& what) {
  std::string last_error;
  for (int attempt = 1; attempt <= options.max_tries; ++attempt) {
    auto response = send();
    if (response.ok() && !is_retryable_status(response->status)) return response;
    last_error = response.ok() ? fmt::format("the Hub answered {}", response->status)
                               : response.error().message;
    if (attempt == options.max_tries) break;
    const auto wait = options.retry_backoff * (1 << (attempt - 1));
    log_warn(fmt::format("{} failed ({}); try {}/{} in {} ms", what, last_error, attempt + 1,
                         options.max_tries, wait.count()));
    std::this_thread::sleep_for(wait);
  }
  return Error{fmt::format("{} failed after {} tries: {}", what, options.max_tries, last_error)};
}

class HubResolver {
 public:
  HubResolver(const std::string& repo_id, const std::string& revision, const GgufRequest& gguf,
              const HubOptions& options)
      : repo_id_(repo_id),
        revision_(revision),
        gguf_(gguf),
        options_(options),
        cache_(options.cache_dir, repo_id) {}

  // The cache alone: refs/{revision} (or the commit itself), then a complete snapshot.
  Result<ResolvedModel> from_cache(const std::string& why) const {
    auto commit = cache_.resolve_revision(revision_);
    if (!commit) {
      return Error{fmt::format(
          "{}, and revision '{}' of {} is not in the cache {} (no {}/refs/{}). Run "
          "`text-generation-launcher download-weights {}` while online, or check "
          "--huggingface-hub-cache.",
          why, revision_, repo_id_, options_.cache_dir, cache_.dir(), revision_, repo_id_)};
    }
    const std::string dir = cache_.snapshot_dir(*commit);
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      return Error{fmt::format("{}, and the cache has no snapshot of {} at commit {} ({}).", why,
                               repo_id_, *commit, dir)};
    }
    ResolvedModel m;
    m.path = dir;
    m.repo_id = repo_id_;
    m.commit_sha = *commit;
    if (serves_gguf(snapshot_files(dir).listed, gguf_)) {
      const std::string context =
          fmt::format("{}, and the cached snapshot of {} at commit {}", why, repo_id_, *commit);
      LM_ASSIGN_OR_RETURN(m.path, gguf_in_folder(dir, gguf_, repo_id_, context));
      log_info(fmt::format("Using {} from the cached snapshot {}", m.path, dir));
      log_info(kAlreadyPresent);
      return m;
    }
    const SnapshotContents contents = inspect_snapshot(dir);
    if (!contents.missing.empty()) {
      return Error{
          fmt::format("{}, and the cached snapshot of {} at commit {} ({}) is missing: {}.", why,
                      repo_id_, *commit, dir, join(contents.missing))};
    }
    log_info(fmt::format("Using the cached snapshot {}", dir));
    log_info(kAlreadyPresent);
    if (contents.format == WeightFormat::kPytorch)
      m.pytorch_files = in_folder(dir, contents.weight_files);
    return m;
  }

  Result<ResolvedModel> from_hub() {
    const std::string url = model_info_url(options_.endpoint, repo_id_, revision_);
    auto response = with_retries([&] { return http_.get(url); }, options_,
                                 "Fetching the model info of " + repo_id_);
    if (!response.ok() || is_retryable_status(response->status)) {
      const std::string why = response.ok()
                                  ? fmt::format("The Hub answered {} for {}", response->status, url)
                                  : response.error().message;
      log_warn(
          fmt::format("Could not retrieve model info from the Hugging Face hub ({}); looking "
                      "in the cache",
                      why));
      return from_cache(why);
    }
    if (response->status != 200) return hub_http_error(*response, context(url, ""));
    LM_ASSIGN_OR_RETURN(HubModelInfo info, parse_model_info(response->body));
    commit_ = info.sha;

    const std::vector<std::string> names = info.file_names();
    if (serves_gguf(names, gguf_)) return gguf_from_hub(info);
    const WeightSelection weights = select_weight_files(names);
    if (weights.format == WeightFormat::kNone) {
      return Error{fmt::format(
          "No safetensors weights found for model {} at revision {} (and no PyTorch .bin "
          "weights either).",
          repo_id_, revision_)};
    }
    if (weights.format == WeightFormat::kPytorch) {
      log_warn(fmt::format(
          "No safetensors weights found for model {} at revision {}. Downloading PyTorch weights.",
          repo_id_, revision_));
    }
    std::vector<std::string> wanted = metadata_files(names);
    std::vector<std::string> weight_files = weights.files;
    if (weights.index_file) {
      // The index names the shards: fetch it first (a few kB; not worth a space check).
      wanted.push_back(*weights.index_file);
      LM_ASSIGN_OR_RETURN(auto index_item, plan({*weights.index_file}, info));
      LM_RETURN_IF_ERROR(fetch(index_item, /*needs_conversion=*/false));
      LM_ASSIGN_OR_RETURN(std::string text,
                          read_text_file(cache_.snapshot_path(commit_, *weights.index_file)));
      LM_ASSIGN_OR_RETURN(weight_files, index_shard_files(text, *weights.index_file));
      for (const std::string& shard : weight_files) {
        if (info.find(shard) == nullptr) {
          return Error{
              fmt::format("{} of {} names the shard {}, which the repository does not have",
                          *weights.index_file, repo_id_, shard)};
        }
      }
    }
    wanted.insert(wanted.end(), weight_files.begin(), weight_files.end());
    LM_ASSIGN_OR_RETURN(auto items, plan(wanted, info));
    const bool pytorch = weights.format == WeightFormat::kPytorch;
    LM_RETURN_IF_ERROR(fetch(items, pytorch));
    if (!downloaded_) log_info(kAlreadyPresent);
    // Last, once every file is in place: the ref a later offline start resolves.
    if (revision_ != commit_) LM_RETURN_IF_ERROR(cache_.write_ref(revision_, commit_));

    ResolvedModel m;
    m.path = cache_.snapshot_dir(commit_);
    m.repo_id = repo_id_;
    m.commit_sha = commit_;
    m.pipeline_tag = info.pipeline_tag;
    if (pytorch) m.pytorch_files = in_folder(m.path, weight_files);
    m.downloaded = downloaded_;
    return m;
  }

 private:
  // The chosen GGUF file (every shard of a split one), and nothing else: the GGUF holds the
  // config, the tokenizer and the chat template.
  Result<ResolvedModel> gguf_from_hub(const HubModelInfo& info) {
    LM_ASSIGN_OR_RETURN(std::vector<std::string> files,
                        choose_gguf_files(info.file_names(), gguf_, repo_id_));
    log_info(files.size() == 1 ? fmt::format("Serving the GGUF file {} of {}", files[0], repo_id_)
                               : fmt::format("Serving the GGUF model {} of {} ({} shards)",
                                             files[0], repo_id_, files.size()));
    LM_ASSIGN_OR_RETURN(auto items, plan(files, info));
    LM_RETURN_IF_ERROR(fetch(items, /*needs_conversion=*/false));
    if (!downloaded_) log_info(kAlreadyPresent);
    if (revision_ != commit_) LM_RETURN_IF_ERROR(cache_.write_ref(revision_, commit_));
    ResolvedModel m;
    m.path = cache_.snapshot_path(commit_, files[0]);
    m.repo_id = repo_id_;
    m.commit_sha = commit_;
    m.pipeline_tag = info.pipeline_tag;
    m.downloaded = downloaded_;
    return m;
  }

  HubRequestContext context(const std::string& url, const std::string& file) const {
    return HubRequestContext{options_.endpoint,         repo_id_, revision_, file, url,
                             options_.token.has_value()};
  }

  // Each wanted file with its etag and size: from the model info, else from a HEAD request
  // (X-Linked-Etag / X-Linked-Size for LFS files, ETag / Content-Length otherwise).
  Result<std::vector<BlobDownload>> plan(const std::vector<std::string>& files,
                                         const HubModelInfo& info) {
    std::vector<BlobDownload> items;
    for (const std::string& name : files) {
      LM_RETURN_IF_ERROR(check_relative_name("file name", name));
      BlobDownload d;
      d.file = name;
      d.url = resolve_url(options_.endpoint, repo_id_, commit_, name);
      if (const RepoFile* f = info.find(name); f != nullptr && f->etag && f->size) {
        d.etag = *f->etag;
        d.size = f->size;
        d.lfs = f->lfs;
      } else if (!cache_.has_file(commit_, name)) {
        auto head = with_retries([&] { return http_.head(d.url); }, options_, "HEAD " + d.url);
        if (!head.ok()) return head.error();
        if (head->status >= 400) return hub_http_error(*head, context(d.url, name));
        const auto linked = head->header("x-linked-etag");
        d.etag = normalize_etag(linked.value_or(head->header("etag").value_or("")));
        d.lfs = linked.has_value();
        const auto size = head->header("x-linked-size") ? head->header("x-linked-size")
                                                        : head->header("content-length");
        if (size) d.size = std::strtoull(size->c_str(), nullptr, 10);
      }
      if (!cache_.has_file(commit_, name)) LM_RETURN_IF_ERROR(check_etag(d.etag));
      items.push_back(std::move(d));
    }
    return items;
  }

  // Links the files whose blob is cached and downloads the others, after the space check.
  Status fetch(const std::vector<BlobDownload>& items, bool needs_conversion) {
    std::vector<BlobDownload> missing;
    uint64_t to_download = 0;
    std::error_code ec;
    for (const BlobDownload& d : items) {
      if (cache_.has_file(commit_, d.file)) continue;
      if (!fs::exists(cache_.blob_path(d.etag), ec)) {
        const uint64_t partial = fs::exists(cache_.incomplete_path(d.etag), ec)
                                     ? fs::file_size(cache_.incomplete_path(d.etag), ec)
                                     : 0;
        const uint64_t size = d.size.value_or(0);
        to_download += size > partial ? size - partial : 0;
        downloaded_ = true;
      }
      missing.push_back(d);
    }
    if (missing.empty()) return {};
    if (to_download > 0) {
      LM_ASSIGN_OR_RETURN(uint64_t free, free_disk_bytes(cache_.dir()));
      LM_RETURN_IF_ERROR(
          check_disk_space(bytes_needed(to_download, needs_conversion), free, cache_.dir()));
    }
    // Both folders from the start, as huggingface_hub makes them: a repo folder without
    // snapshots/ is what its cache scan reports as corrupted.
    for (const std::string& dir : {cache_.dir() + "/blobs", cache_.snapshot_dir(commit_)}) {
      fs::create_directories(dir, ec);
      if (ec) return Error{"cannot create " + dir + ": " + ec.message()};
    }
    return download_files(DownloadTarget{&cache_, options_.endpoint, repo_id_, revision_, commit_},
                          missing, options_);
  }

  std::string repo_id_;
  std::string revision_;
  GgufRequest gguf_;
  const HubOptions& options_;
  RepoCache cache_;
  HttpClient http_{options_};
  std::string commit_;
  bool downloaded_ = false;
};

Result<ResolvedModel> from_override(const ModelRequest& request, const std::string& repo_id,
                                    const GgufRequest& gguf) {
  const std::string& dir = *request.weights_cache_override;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return Error{"WEIGHTS_CACHE_OVERRIDE " + dir + " is not a folder"};
  if (serves_gguf(snapshot_files(dir).listed, gguf)) {
    ResolvedModel m;
    m.repo_id = repo_id;
    LM_ASSIGN_OR_RETURN(m.path,
                        gguf_in_folder(dir, gguf, repo_id, "WEIGHTS_CACHE_OVERRIDE is set"));
    log_info(kAlreadyPresent);
    return m;
  }
  const SnapshotContents contents = inspect_snapshot(dir);
  if (!contents.missing.empty()) {
    return Error{fmt::format("The WEIGHTS_CACHE_OVERRIDE folder {} is missing: {}.", dir,
                             join(contents.missing))};
  }
  log_info(kAlreadyPresent);
  ResolvedModel m;
  m.path = dir;
  m.repo_id = repo_id;
  if (contents.format == WeightFormat::kPytorch)
    m.pytorch_files = in_folder(dir, contents.weight_files);
  return m;
}

}  // namespace

Result<ResolvedModel> resolve_model(const ModelRequest& request, const HubOptions& options) {
  struct stat st {};
  if (::stat(request.model_id.c_str(), &st) == 0) {
    if (request.revision)
      log_warn("--revision has no effect on the local model " + request.model_id);
    if (request.gguf_file)
      log_warn("--gguf-file has no effect on the local model " + request.model_id);
    ResolvedModel m;
    m.path = request.model_id;
    // A local folder with only PyTorch .bin weights is converted beside them too, as TGI's
    // download-weights converts a local model's .bin files.
    if (S_ISDIR(st.st_mode)) {
      const SnapshotContents contents = inspect_snapshot(m.path);
      if (contents.format == WeightFormat::kPytorch)
        m.pytorch_files = in_folder(m.path, contents.weight_files);
    }
    return m;
  }
  const auto [id, quant] = split_quant_tag(request.model_id);
  if (looks_like_path(id) || !is_valid_repo_id(id)) {
    return Error{"model '" + request.model_id +
                 "' is not a local folder or file, nor a Hugging Face Hub repository id "
                 "(org/name, or org/name:QUANT for a GGUF repository): pass --model-id a model "
                 "folder (config.json + safetensors), a .gguf file or a Hub id"};
  }
  const GgufRequest gguf{request.gguf_file, quant};
  if (request.weights_cache_override) return from_override(request, id, gguf);
  const std::string revision = request.revision.value_or("main");
  LM_RETURN_IF_ERROR(check_relative_name("revision", revision));
  HubResolver resolver(id, revision, gguf, options);
  if (options.offline) {
    return resolver.from_cache("HF_HUB_OFFLINE is set (the cache only, no network)");
  }
  return resolver.from_hub();
}

}  // namespace lm::hub
