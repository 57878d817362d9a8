#include "hub/hub_options.h"

#include <gtest/gtest.h>

#include <map>

namespace lm::hub {
namespace {

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(HubOptions, CacheFolderPrecedence) {
  EXPECT_EQ(hub_cache_dir("/flag", env_of({{"HUGGINGFACE_HUB_CACHE", "/a"}})), "/flag");
  EXPECT_EQ(hub_cache_dir(std::nullopt,
                          env_of({{"HUGGINGFACE_HUB_CACHE", "/a"}, {"HF_HUB_CACHE", "/b"}})),
            "/a");
  EXPECT_EQ(hub_cache_dir(std::nullopt, env_of({{"HF_HUB_CACHE", "/b"}, {"HF_HOME", "/data"}})),
            "/b");
  EXPECT_EQ(hub_cache_dir(std::nullopt, env_of({{"HF_HOME", "/data"}})), "/data/hub");
  EXPECT_EQ(hub_cache_dir(std::nullopt, env_of({{"XDG_CACHE_HOME", "/x"}, {"HOME", "/h"}})),
            "/x/huggingface/hub");
  EXPECT_EQ(hub_cache_dir(std::nullopt, env_of({{"HOME", "/home/u"}})),
            "/home/u/.cache/huggingface/hub");
  EXPECT_EQ(hub_cache_dir(std::nullopt, env_of({{"HUGGINGFACE_HUB_CACHE", ""}, {"HOME", "/h"}})),
            "/h/.cache/huggingface/hub");  // empty = unset
}

TEST(HubOptions, OfflineValues) {
  for (const char* yes : {"1", "true", "TRUE", "yes", "on", " 1 "})
    EXPECT_TRUE(env_value_true(std::string(yes))) << yes;
  for (const char* no : {"0", "false", "", "no", "2"})
    EXPECT_FALSE(env_value_true(std::string(no)));
  EXPECT_FALSE(env_value_true(std::nullopt));
}

TEST(HubOptions, FromEnvironment) {
  auto o = hub_options_from_env(std::nullopt, env_of({{"HF_ENDPOINT", "http://127.0.0.1:9/"},
                                                      {"HF_TOKEN", "hf_a"},
                                                      {"HUGGING_FACE_HUB_TOKEN", "hf_b"},
                                                      {"HF_HUB_OFFLINE", "yes"},
                                                      {"HF_HOME", "/nonexistent-hf-home"},
                                                      {"HUB_RETRY_BACKOFF_MS", "20"}}));
  EXPECT_EQ(o.endpoint, "http://127.0.0.1:9");
  EXPECT_EQ(o.token, "hf_a");
  EXPECT_TRUE(o.offline);
  EXPECT_EQ(o.cache_dir, "/nonexistent-hf-home/hub");
  EXPECT_EQ(o.retry_backoff.count(), 20);
  // TGI's launcher copies HF_API_TOKEN into HF_TOKEN; the older name comes last.
  EXPECT_EQ(hub_options_from_env(std::nullopt, env_of({{"HF_API_TOKEN", "hf_api"},
                                                       {"HF_TOKEN", "hf_a"},
                                                       {"HF_HOME", "/nonexistent-hf-home"}}))
                .token,
            "hf_api");
  EXPECT_EQ(hub_options_from_env(std::nullopt, env_of({{"HUGGING_FACE_HUB_TOKEN", "hf_b"},
                                                       {"HF_HOME", "/nonexistent-hf-home"}}))
                .token,
            "hf_b");
  auto defaults = hub_options_from_env(std::nullopt, env_of({{"HF_HOME", "/nonexistent-hf-home"}}));
  EXPECT_EQ(defaults.endpoint, "https://huggingface.co");
  EXPECT_FALSE(defaults.token);
  EXPECT_FALSE(defaults.offline);
}

}  // namespace
}  // namespace lm::hub
