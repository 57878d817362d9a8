// Linked into the model-level test binaries: CPU_ISA=<level> caps the CPU kernels at that level
// for the whole run, as the launcher's --cpu-isa does (ctest runs these binaries once per level,
// tests/CMakeLists.txt). A level this CPU does not run exits with kSkipExitCode before any test,
// which ctest reports as skipped.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "kernels/cpu/isa.h"

namespace lm {
namespace {

constexpr int kSkipExitCode = 77;  // SKIP_RETURN_CODE in tests/CMakeLists.txt

class CpuIsaEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const char* value = std::getenv("CPU_ISA");
    if (value == nullptr || std::string(value) == "auto") return;
    const auto isa = kernels::parse_isa(value);
    ASSERT_TRUE(isa.has_value()) << "CPU_ISA=" << value << " is not a kernel level";
    if (!kernels::isa_supported(*isa)) {
      std::printf("CPU_ISA=%s: not a level this CPU runs (its best: %s); skipping every test\n",
                  value, kernels::isa_name(kernels::detected_isa()));
      std::fflush(stdout);
      std::exit(kSkipExitCode);
    }
    const Status selected = kernels::select_isa(*isa);
    ASSERT_TRUE(selected.ok()) << selected.error().message;
    std::printf("[ cpu isa  ] kernels capped at %s (this CPU runs %s)\n",
                kernels::isa_name(kernels::best_isa()), kernels::isa_name(kernels::detected_isa()));
  }
};

[[maybe_unused]] ::testing::Environment* const kCpuIsaEnvironment =
    ::testing::AddGlobalTestEnvironment(new CpuIsaEnvironment);

}  // namespace
}  // namespace lm
