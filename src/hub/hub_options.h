// Where the Hub is and how to reach it, from the same environment variables huggingface_hub reads:
// HF_ENDPOINT, HF_TOKEN (TGI's launcher copies HF_API_TOKEN into it), HUGGING_FACE_HUB_TOKEN,
// the stored login token, HF_HUB_OFFLINE, and the cache folder (HUGGINGFACE_HUB_CACHE,
// HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME).
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

namespace lm::hub {

struct HubOptions {
  std::string endpoint = "https://huggingface.co";  // no trailing slash
  std::optional<std::string> token;
  std::string cache_dir;  // the hub cache root holding models--org--name folders
  bool offline = false;   // HF_HUB_OFFLINE: the cache only, never the network
  int max_tries = 5;      // per request, as TGI's download loop
  // Wait before retry n (1-based): retry_backoff * 2^(n-1). HUB_RETRY_BACKOFF_MS overrides it.
  std::chrono::milliseconds retry_backoff{1000};
  int max_parallel_downloads = 4;
  std::chrono::milliseconds progress_interval{1000};  // at most one progress log line per this
  std::chrono::seconds connect_timeout{10};
  std::chrono::seconds stall_timeout{60};  // a transfer with no byte for this long is retried
};

// Reads a variable; empty optional when unset. Tests pass a map instead of the process env.
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;
std::optional<std::string> process_env(const char* name);

// huggingface_hub's truthy values: 1, true, yes, on (any case).
bool env_value_true(const std::optional<std::string>& value);

// The cache root: `cache_dir_flag` (--huggingface-hub-cache, env HUGGINGFACE_HUB_CACHE), else
// HF_HUB_CACHE, else $HF_HOME/hub, else ${XDG_CACHE_HOME:-~/.cache}/huggingface/hub.
std::string hub_cache_dir(const std::optional<std::string>& cache_dir_flag, const EnvLookup& env);

HubOptions hub_options_from_env(const std::optional<std::string>& cache_dir_flag,
                                const EnvLookup& env = process_env);

}  // namespace lm::hub
