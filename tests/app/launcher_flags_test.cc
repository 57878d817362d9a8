// --device and --cpu-isa parsing (flag, environment variable, allowed values), the
// resolution of --device for CPU-only and CUDA builds and the --cpu-isa start line, without
// starting a server.
#include "app/launcher_flags.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include "../app/launcher_test_helpers.h"
#include "app/cpu_isa_flag.h"

namespace lm {
namespace {

using testing_app::parse;

TEST(LauncherFlags, DeviceDefaultsToAutoAndTakesFlagOrEnvironment) {
  unsetenv("DEVICE");
  LauncherArgs a;
  EXPECT_EQ(parse({}, a), "");
  EXPECT_EQ(a.device, "auto");
  EXPECT_EQ(parse({"--device", "cpu"}, a), "");
  EXPECT_EQ(a.device, "cpu");
  setenv("DEVICE", "cuda", 1);
  LauncherArgs b;
  EXPECT_EQ(parse({}, b), "");
  EXPECT_EQ(b.device, "cuda");
  LauncherArgs c;
  EXPECT_EQ(parse({"--device", "cpu"}, c), "");  // the flag wins over the environment
  EXPECT_EQ(c.device, "cpu");
  unsetenv("DEVICE");
  LauncherArgs d;
  EXPECT_NE(parse({"--device", "tpu"}, d), "");
  LauncherArgs e;  // other TGI flags still parse next to it
  EXPECT_EQ(parse({"--device", "auto", "--max-batch-size", "4", "-p", "8081"}, e), "");
  EXPECT_EQ(e.port, 8081);
  ASSERT_TRUE(e.max_batch_size.has_value());
  EXPECT_EQ(*e.max_batch_size, 4);
}

TEST(LauncherFlags, SpeculativeModelIdTakesFlagOrEnvironment) {
  unsetenv("SPECULATIVE_MODEL_ID");
  LauncherArgs a;
  EXPECT_EQ(parse({}, a), "");
  EXPECT_FALSE(a.speculative_model_id.has_value());
  setenv("SPECULATIVE_MODEL_ID", "HuggingFaceTB/SmolLM2-135M-Instruct", 1);
  LauncherArgs b;
  EXPECT_EQ(parse({}, b), "");
  EXPECT_EQ(b.speculative_model_id, "HuggingFaceTB/SmolLM2-135M-Instruct");
  unsetenv("SPECULATIVE_MODEL_ID");
  LauncherArgs c;
  EXPECT_EQ(parse({"--speculative-model-id", "/data/draft.gguf"}, c), "");
  EXPECT_EQ(c.speculative_model_id, "/data/draft.gguf");
}

TEST(LauncherFlags, AdaptiveSpeculationIsOnUnlessTurnedOff) {
  unsetenv("ADAPTIVE_SPECULATION");
  LauncherArgs a;
  EXPECT_EQ(parse({}, a), "");
  EXPECT_TRUE(a.adaptive_speculation);
  LauncherArgs b;
  EXPECT_EQ(parse({"--adaptive-speculation", "false"}, b), "");
  EXPECT_FALSE(b.adaptive_speculation);
  setenv("ADAPTIVE_SPECULATION", "false", 1);
  LauncherArgs c;
  EXPECT_EQ(parse({}, c), "");
  EXPECT_FALSE(c.adaptive_speculation);
  unsetenv("ADAPTIVE_SPECULATION");
}

TEST(LauncherFlags, MaxStepLatencyDefaultsTo300MsAndTakesFlagOrEnvironment) {
  unsetenv("MAX_STEP_LATENCY_MS");
  LauncherArgs a;
  EXPECT_EQ(parse({}, a), "");
  EXPECT_EQ(a.max_step_latency_ms, 300);
  setenv("MAX_STEP_LATENCY_MS", "0", 1);
  LauncherArgs b;
  EXPECT_EQ(parse({}, b), "");
  EXPECT_EQ(b.max_step_latency_ms, 0);  // today's behaviour
  LauncherArgs c;
  EXPECT_EQ(parse({"--max-step-latency-ms", "75"}, c), "");
  EXPECT_EQ(c.max_step_latency_ms, 75);
  unsetenv("MAX_STEP_LATENCY_MS");
  LauncherArgs d;
  EXPECT_EQ(parse({"--max-step-latency-ms", "-1"}, d), "");
  const auto checked = check_launcher_args(d);
  ASSERT_FALSE(checked.ok());
  EXPECT_NE(checked.error().message.find("`max_step_latency_ms` must be >= 0"), std::string::npos);
}

TEST(LauncherFlags, CudaRunsWhereADeviceIsVisibleAndAutoFallsBackToCpu) {
  std::string note;
  auto cpu = resolve_device("cpu", false, 0, note);
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(*cpu, "cpu");
  EXPECT_EQ(note, "");

  auto no_cuda = resolve_device("cuda", /*built_with_cuda=*/false, 0, note);
  ASSERT_FALSE(no_cuda.ok());
  EXPECT_NE(no_cuda.error().message.find(
                "this binary was built without CUDA (nvcc not found at configure time); use "
                "--device cpu"),
            std::string::npos);
  auto no_device = resolve_device("cuda", /*built_with_cuda=*/true, 0, note);
  ASSERT_FALSE(no_device.ok());
  EXPECT_NE(no_device.error().message.find("no CUDA device is visible"), std::string::npos);
  auto cuda = resolve_device("cuda", /*built_with_cuda=*/true, 1, note);
  ASSERT_TRUE(cuda.ok());
  EXPECT_EQ(*cuda, "cuda");

  for (bool built : {false, true}) {
    for (int devices : {0, 2}) {
      auto choice = resolve_device("auto", built, devices, note);
      ASSERT_TRUE(choice.ok());
      const std::string expected = built && devices > 0 ? "cuda" : "cpu";
      EXPECT_EQ(*choice, expected);
      EXPECT_NE(note.find("Device: " + expected + " (auto;"), std::string::npos) << note;
    }
  }
  EXPECT_FALSE(resolve_device("tpu", true, 1, note).ok());

  // This binary on this machine (no GPU): auto runs on the CPU, cuda is refused.
  auto here = resolve_device("auto", note);
  ASSERT_TRUE(here.ok());
  EXPECT_EQ(*here, "cpu");
  EXPECT_FALSE(resolve_device("cuda", note).ok());
}

}  // namespace
}  // namespace lm

namespace lm {
namespace {

TEST(CpuIsaFlag, DefaultsToAutoAndTakesFlagOrEnvironment) {
  unsetenv("CPU_ISA");
  LauncherArgs a;
  EXPECT_EQ(parse({}, a), "");
  EXPECT_EQ(a.cpu_isa, "auto");
  setenv("CPU_ISA", "avx2", 1);
  LauncherArgs b;
  EXPECT_EQ(parse({}, b), "");
  EXPECT_EQ(b.cpu_isa, "avx2");
  LauncherArgs c;
  EXPECT_EQ(parse({"--cpu-isa", "scalar"}, c), "");  // the flag wins over the environment
  EXPECT_EQ(c.cpu_isa, "scalar");
  unsetenv("CPU_ISA");
}

TEST(CpuIsaFlag, ValuesAreAutoOrTheKernelLevels) {
  auto none = parse_cpu_isa("auto");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  for (const char* name : kCpuIsaValues) {
    if (std::string(name) == "auto") continue;
    auto cap = parse_cpu_isa(name);
    ASSERT_TRUE(cap.ok()) << name;
    ASSERT_TRUE(cap->has_value()) << name;
    EXPECT_STREQ(kernels::isa_name(**cap), name);
  }
  auto bad = parse_cpu_isa("avx512vnni");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message,
            "--cpu-isa must be auto, scalar, avx2, avx-vnni, avx512, avx512-vnni or avx512-bf16, "
            "not avx512vnni");
}

TEST(CpuIsaFlag, LogLineSaysWhetherTheLevelWasCapped) {
  using kernels::Isa;
  EXPECT_EQ(cpu_isa_log_line(Isa::kAvx512Vnni, Isa::kAvx512Vnni, false, ""),
            "CPU kernels: avx512-vnni (the best this CPU runs)");
  EXPECT_EQ(cpu_isa_log_line(Isa::kAvx2, Isa::kAvx512Vnni, true, ""),
            "CPU kernels: avx2 (capped by --cpu-isa; this CPU runs avx512-vnni)");
  EXPECT_EQ(cpu_isa_log_line(Isa::kAvx2, Isa::kAvx2, false, "the OS does not enable ZMM"),
            "CPU kernels: avx2 (the best this CPU runs); the OS does not enable ZMM");
}

}  // namespace
}  // namespace lm
