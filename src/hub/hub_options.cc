#include "hub/hub_options.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "base/text_file.h"

namespace lm::hub {
namespace {

std::optional<std::string> non_empty(const EnvLookup& env, const char* name) {
  auto value = env(name);
  if (value && value->empty()) return std::nullopt;
  return value;
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t start = 0;
  while (start < s.size() && std::isspace(static_cast<unsigned char>(s[start]))) ++start;
  return s.substr(start);
}

std::string hf_home(const EnvLookup& env) {
  if (auto home = non_empty(env, "HF_HOME")) return *home;
  if (auto xdg = non_empty(env, "XDG_CACHE_HOME")) return *xdg + "/huggingface";
  return non_empty(env, "HOME").value_or("") + "/.cache/huggingface";
}

}  // namespace

std::optional<std::string> process_env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

bool env_value_true(const std::optional<std::string>& value) {
  if (!value) return false;
  std::string v = trim(*value);
  std::transform(v.begin(), v.end(), v.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return v == "1" || v == "true" || v == "yes" || v == "on";
}

std::string hub_cache_dir(const std::optional<std::string>& cache_dir_flag, const EnvLookup& env) {
  if (cache_dir_flag && !cache_dir_flag->empty()) return *cache_dir_flag;
  if (auto dir = non_empty(env, "HUGGINGFACE_HUB_CACHE")) return *dir;
  if (auto dir = non_empty(env, "HF_HUB_CACHE")) return *dir;
  return hf_home(env) + "/hub";
}

HubOptions hub_options_from_env(const std::optional<std::string>& cache_dir_flag,
                                const EnvLookup& env) {
  HubOptions o;
  if (auto endpoint = non_empty(env, "HF_ENDPOINT")) {
    o.endpoint = *endpoint;
    while (!o.endpoint.empty() && o.endpoint.back() == '/') o.endpoint.pop_back();
  }
  // TGI's launcher hands HF_API_TOKEN to its children as HF_TOKEN, so it wins here too.
  for (const char* name : {"HF_API_TOKEN", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"}) {
    if (auto token = non_empty(env, name)) {
      o.token = trim(*token);
      break;
    }
  }
  if (!o.token) {  // `huggingface-cli login` stores the token in a file
    const std::string path = non_empty(env, "HF_TOKEN_PATH").value_or(hf_home(env) + "/token");
    if (file_exists(path)) {
      auto text = read_text_file(path, 4096);
      if (text.ok() && !trim(*text).empty()) o.token = trim(*text);
    }
  }
  o.cache_dir = hub_cache_dir(cache_dir_flag, env);
  o.offline = env_value_true(env("HF_HUB_OFFLINE"));
  if (auto backoff = non_empty(env, "HUB_RETRY_BACKOFF_MS")) {
    char* end = nullptr;
    const long ms = std::strtol(backoff->c_str(), &end, 10);
    if (end != backoff->c_str() && *end == '\0' && ms >= 0)
      o.retry_backoff = std::chrono::milliseconds(ms);
  }
  return o;
}

}  // namespace lm::hub
