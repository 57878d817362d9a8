#include "app/launcher_args.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "../app/launcher_test_helpers.h"

namespace lm {
namespace {

using testing_app::check_error;

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

// Settings that would change results and are not built: refused, naming what is missing.
TEST(LauncherArgs, RefusesSettingsThatChangeResultsAndAreNotBuilt) {
  LauncherArgs a;
  a.quantize = "exl2";  // ExLlamaV2's format: not built
  EXPECT_NE(check_error(a).find("--quantize exl2 is not supported yet"), std::string::npos);
  for (const char* prequantized : {"gptq", "awq", "compressed-tensors", "marlin", "fp8"}) {
    a.quantize = prequantized;  // checked against the checkpoint at load
    EXPECT_TRUE(check_launcher_args(a).ok()) << prequantized;
  }
  for (const char* at_load :
       {"q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k", "bitsandbytes",
        "bitsandbytes-nf4", "bitsandbytes-fp4", "eetq", "fp8"}) {
    a.quantize = at_load;  // ours: a float checkpoint quantized at load
    EXPECT_TRUE(check_launcher_args(a).ok()) << at_load;
  }
  a.quantize = "q2_k";
  EXPECT_NE(
      check_error(a).find(
          "bitsandbytes (LLM.int8), bitsandbytes-nf4 / bitsandbytes-fp4, eetq and fp8 are built"),
      std::string::npos);
  a = {};
  a.num_shard = 2;
  EXPECT_NE(check_error(a).find("sharding"), std::string::npos);
  EXPECT_NE(check_error(a).find("issue 25"), std::string::npos);
  a = {};
  a.sharded = "true";
  EXPECT_NE(check_error(a).find("sharding"), std::string::npos);
  a = {};
  a.lora_adapters = "org/adapter";
  EXPECT_NE(check_error(a).find("--lora-adapters is not supported yet"), std::string::npos);
  a = {};
  a.kv_cache_dtype = "fp4";
  EXPECT_EQ(check_error(a),
            "--kv-cache-dtype fp4: expected fp8_e4m3fn, fp8_e5m2, fp8, fp16, bf16 or fp32");
  for (const char* name : {"fp8_e4m3fn", "fp8_e5m2", "fp8", "fp16", "bf16", "fp32"}) {
    a = {};
    a.kv_cache_dtype = name;
    EXPECT_EQ(check_error(a), "") << name;
  }
  a = {};
  a.device = "tpu";
  EXPECT_NE(check_error(a).find("the backends are cpu and cuda"), std::string::npos);
  a = {};
  a.device = "cuda";
  EXPECT_EQ(check_error(a), "");
  a.cuda_memory_fraction = 0.0;
  EXPECT_EQ(check_error(a), "Invalid argument: `cuda_memory_fraction` must be in (0, 1]");
  a = {};
  a.dtype = "float8";
  EXPECT_EQ(check_error(a), "Invalid argument: `dtype` must be one of float16, bfloat16, float32");
  a = {};
  a.rope_scaling = "yarn";
  EXPECT_EQ(check_error(a), "Invalid argument: `rope_scaling` must be one of linear, dynamic");
}

// What a TGI manifest sets, with nothing to refuse on a CPU: accepted, each harmless one noted.
// --speculate N: n-gram speculation, built; TGI's usize, bounded here.
TEST(LauncherArgs, SpeculateIsAcceptedWithinItsRange) {
  LauncherArgs a;
  for (int64_t n : {0, 1, 3, 64}) {
    a.speculate = n;
    EXPECT_TRUE(check_launcher_args(a).ok()) << n;
  }
  for (int64_t n : {-1, 65}) {
    a.speculate = n;
    EXPECT_EQ(check_error(a), "Invalid argument: `speculate` must be in 0..64") << n;
  }
}

// --speculative-model-id: a draft model, loaded only where speculation runs.
TEST(LauncherArgs, ADraftModelIsNotedWhereItHasNoEffect) {
  LauncherArgs a;
  a.speculative_model_id = "draft.gguf";
  auto notes = check_launcher_args(a);
  ASSERT_TRUE(notes.ok());
  EXPECT_TRUE(notes->empty());
  a.speculate = 0;
  notes = check_launcher_args(a);
  ASSERT_TRUE(notes.ok());
  ASSERT_EQ(notes->size(), 1u);
  EXPECT_EQ(notes->front(),
            "--speculative-model-id has no effect with --speculate 0: the draft model is not "
            "loaded");
  a.speculate = 4;
  a.device = "cuda";
  notes = check_launcher_args(a);
  ASSERT_TRUE(notes.ok());
  EXPECT_NE(std::ranges::find(*notes,
                              "--speculative-model-id has no effect on the CUDA backend "
                              "(speculation is off there): the draft model is not loaded"),
            notes->end());
}

TEST(LauncherArgs, AcceptsTgiManifestSettings) {
  LauncherArgs a;
  a.revision = "main";
  a.huggingface_hub_cache = "/data";
  a.weights_cache_override = "/weights";
  a.sharded = "false";
  a.num_shard = 1;
  a.dtype = "bfloat16";
  a.rope_scaling = "dynamic";
  a.rope_factor = 2.0;
  a.tokenizer_config_path = "/cfg/tokenizer_config.json";
  a.disable_grammar_support = true;
  auto notes = check_launcher_args(a);
  ASSERT_TRUE(notes.ok()) << notes.error().message;
  EXPECT_TRUE(notes->empty());

  a.cuda_graphs = "1,2,4,8";
  a.cuda_memory_fraction = 0.9;
  a.disable_custom_kernels = true;
  a.otlp_endpoint = "http://otel:4317";
  a.otlp_service_name = "my-service";
  a.trust_remote_code = true;
  notes = check_launcher_args(a);
  ASSERT_TRUE(notes.ok()) << notes.error().message;
  ASSERT_EQ(notes->size(), 5u);
  std::string all;
  for (const std::string& n : *notes) all += n + "\n";
  EXPECT_NE(all.find("--cuda-graphs 1,2,4,8 has no effect on the CPU backend"), std::string::npos);
  EXPECT_NE(all.find("--cuda-memory-fraction has no effect"), std::string::npos);
  EXPECT_NE(all.find("--disable-custom-kernels has no effect"), std::string::npos);
  // We export OTLP/HTTP: TGI's gRPC port is worth a warning (4318 is not).
  EXPECT_NE(all.find("--otlp-endpoint http://otel:4317: port 4317 is OTLP/gRPC's, but traces are "
                     "exported with OTLP/HTTP (JSON), which a collector receives on port 4318"),
            std::string::npos);
  EXPECT_NE(all.find("--trust-remote-code has no effect"), std::string::npos);
  a.otlp_endpoint = "http://otel:4318";
  notes = check_launcher_args(a);
  ASSERT_TRUE(notes.ok()) << notes.error().message;
  EXPECT_EQ(notes->size(), 4u);
  EXPECT_TRUE(check_launcher_args(LauncherArgs{}).ok());
}

TEST(LauncherArgs, DtypeAndRopeScalingAsTgiReadsThem) {
  LauncherArgs a;
  EXPECT_EQ(*launcher_dtype(a), std::nullopt);
  a.dtype = "float16";
  EXPECT_EQ(*launcher_dtype(a), DType::kF16);
  a.dtype = "bfloat16";
  EXPECT_EQ(*launcher_dtype(a), DType::kBF16);
  a.dtype = "float32";
  EXPECT_EQ(*launcher_dtype(a), DType::kF32);
  a.dtype = "half";
  EXPECT_FALSE(launcher_dtype(a).ok());

  a = {};
  EXPECT_FALSE(launcher_rope_scaling(a)->has_value());
  a.rope_factor = 4.0;  // a factor alone means linear
  auto rope = launcher_rope_scaling(a);
  ASSERT_TRUE(rope.ok() && rope->has_value());
  EXPECT_EQ((*rope)->type, RopeType::kLinear);
  EXPECT_EQ((*rope)->factor, 4.0);
  a = {};
  a.rope_scaling = "dynamic";  // a type alone has factor 1.0
  rope = launcher_rope_scaling(a);
  ASSERT_TRUE(rope.ok() && rope->has_value());
  EXPECT_EQ((*rope)->type, RopeType::kDynamic);
  EXPECT_EQ((*rope)->factor, 1.0);
  a.rope_factor = 0.0;
  EXPECT_FALSE(launcher_rope_scaling(a).ok());
}

TEST(LauncherArgs, DerivesLimitsFromModelAndMemory) {
  LauncherArgs a;
  // 8192 positions, 1000 KV bytes per token, 100 MB of weights, 1 KB of workspace per token.
  ModelLimits m{8192, 1000, 100'000'000, 1000};
  const uint64_t available = 2'000'000'000ull;
  auto s = derive_serve_settings(a, m, available);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->margin_bytes, kFixedMarginBytes + 4096 * 1000);
  const int64_t budget =
      static_cast<int64_t>(available) - 100'000'000 - kFixedMarginBytes - 4096 * 1000;
  EXPECT_EQ(s->kv_budget_bytes, budget / 2);  // kv_cache_memory_fraction 0.5
  EXPECT_EQ(s->max_batch_total_tokens, budget / 2 / 1000);
  EXPECT_TRUE(s->max_batch_total_tokens_inferred);
  EXPECT_EQ(s->max_total_tokens, 8192);
  EXPECT_EQ(s->max_input_tokens, 8191);
  EXPECT_EQ(s->max_batch_prefill_tokens, 4096);
  // Little memory: max_total_tokens shrinks to what fits.
  s = derive_serve_settings(a, m, 100'000'000 + kFixedMarginBytes + 4096 * 1000 + 10'000'000);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->max_batch_total_tokens, 5000);
  EXPECT_EQ(s->max_total_tokens, 5000);
  EXPECT_EQ(s->max_input_tokens, 4999);
  // Not even the weights fit: nothing is left for the KV cache, and TGI's check says so.
  s = derive_serve_settings(a, m, 50'000'000);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(
      s.error().message.find("`max_batch_prefill_tokens` must be <= `max_batch_total_tokens`"),
      std::string::npos);
  // A given budget is used as is.
  a.max_batch_total_tokens = 20000;
  s = derive_serve_settings(a, m, 0);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->max_batch_total_tokens, 20000);
  EXPECT_FALSE(s->max_batch_total_tokens_inferred);
}

TEST(LauncherArgs, RouterChecksOnDerivedValues) {
  LauncherArgs a;
  a.max_batch_total_tokens = 1000;
  a.max_batch_prefill_tokens = 2000;
  auto s = derive_serve_settings(a, ModelLimits{8192, 1000, 0, 0}, 1ull << 30);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message,
            "Argument validation error: `max_batch_prefill_tokens` must be <= "
            "`max_batch_total_tokens`. Given: 2000 and 1000");
  a = {};
  a.max_input_tokens = 4096;
  s = derive_serve_settings(a, ModelLimits{2048, 1000, 0, 0}, 1ull << 30);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message,
            "Argument validation error: `max_input_tokens` must be < `max_total_tokens`");
}

}  // namespace
}  // namespace lm
