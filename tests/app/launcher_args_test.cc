#include "app/launcher_args.h"

#include <gtest/gtest.h>

namespace lm {
namespace {

std::string check_error(const LauncherArgs& a) {
  auto r = check_launcher_args(a);
  return r.ok() ? "" : r.error().message;
}

TEST(LauncherArgs, TgiCrossChecksWithTgiMessages) {
  LauncherArgs a;
  a.max_input_tokens = 10;
  a.max_input_length = 10;
  EXPECT_NE(
      check_error(a).find("Both `max_input_tokens` (10) and `max_input_length` (10) are set."),
      std::string::npos);
  a = {};
  a.max_input_tokens = 100;
  a.max_total_tokens = 100;
  EXPECT_EQ(check_error(a),
            "Invalid argument: `max_input_tokens`(100) must be < `max_total_tokens`(100)");
  a = {};
  a.max_input_length = 200;  // the legacy name counts too
  a.max_total_tokens = 100;
  EXPECT_NE(check_error(a).find("`max_input_tokens`(200) must be < `max_total_tokens`(100)"),
            std::string::npos);
  a = {};
  a.validation_workers = 0;
  EXPECT_EQ(check_error(a), "Invalid argument: `validation_workers` must be > 0");
  a = {};
  a.max_total_tokens = 5000;
  a.max_batch_total_tokens = 4000;
  EXPECT_EQ(check_error(a),
            "Invalid argument: `max_total_tokens` must be <= `max_batch_total_tokens`. Given: 5000 "
            "and 4000");
}

TEST(LauncherArgs, RefusesFlagsWhoseFeatureIsNotBuilt) {
  LauncherArgs a;
  a.quantize = "gptq";
  EXPECT_NE(check_error(a).find("--quantize is not supported yet"), std::string::npos);
  a = {};
  a.num_shard = 2;
  EXPECT_NE(check_error(a).find("sharding"), std::string::npos);
  a = {};
  a.revision = "main";  // the Hub flags work
  a.huggingface_hub_cache = "/data";
  a.weights_cache_override = "/weights";
  EXPECT_EQ(check_error(a), "");
  a = {};
  a.device = "cuda";
  EXPECT_NE(check_error(a).find("CPU backend only"), std::string::npos);
  a = {};
  a.trust_remote_code = true;
  auto warnings = check_launcher_args(a);
  ASSERT_TRUE(warnings.ok());
  ASSERT_EQ(warnings->size(), 1u);
  EXPECT_NE((*warnings)[0].find("no effect"), std::string::npos);
  EXPECT_TRUE(check_launcher_args(LauncherArgs{}).ok());
}

TEST(LauncherArgs, DerivesLimitsFromModelAndMemory) {
  LauncherArgs a;
  ModelLimits m{8192, 1000};
  auto s = derive_serve_settings(a, m, 2'000'000'000ull);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->max_batch_total_tokens, 1'000'000);  // half of 2 GB / 1000 bytes per token
  EXPECT_TRUE(s->max_batch_total_tokens_inferred);
  EXPECT_EQ(s->max_total_tokens, 8192);
  EXPECT_EQ(s->max_input_tokens, 8191);
  EXPECT_EQ(s->max_batch_prefill_tokens, 4096);
  // Little memory: max_total_tokens shrinks to what fits.
  s = derive_serve_settings(a, m, 10'000'000ull);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->max_batch_total_tokens, 5000);
  EXPECT_EQ(s->max_total_tokens, 5000);
  EXPECT_EQ(s->max_input_tokens, 4999);
}

TEST(LauncherArgs, RouterChecksOnDerivedValues) {
  LauncherArgs a;
  a.max_batch_total_tokens = 1000;
  a.max_batch_prefill_tokens = 2000;
  auto s = derive_serve_settings(a, ModelLimits{8192, 1000}, 1ull << 30);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message,
            "Argument validation error: `max_batch_prefill_tokens` must be <= "
            "`max_batch_total_tokens`. Given: 2000 and 1000");
  a = {};
  a.max_input_tokens = 4096;
  s = derive_serve_settings(a, ModelLimits{2048, 1000}, 1ull << 30);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message,
            "Argument validation error: `max_input_tokens` must be < `max_total_tokens`");
}

}  // namespace
}  // namespace lm
