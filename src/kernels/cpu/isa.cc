// Run-time ISA detection (cpuid via the compiler builtins) and the per-ISA kernel tables.
#include "kernels/cpu/isa.h"

#include "base/check.h"

namespace lm::kernels {

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
#if defined(__x86_64__) || defined(__i386__)
      __builtin_cpu_init();
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
             __builtin_cpu_supports("f16c");
#else
      return false;
#endif
    case Isa::kAvx512:
#if defined(__x86_64__) || defined(__i386__)
      return isa_supported(Isa::kAvx2) && __builtin_cpu_supports("avx512f");
#else
      return false;
#endif
    case Isa::kAvx512Vnni:
#if defined(__x86_64__) || defined(__i386__)
      return isa_supported(Isa::kAvx512) && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vnni");
#else
      return false;
#endif
  }
  return false;
}

Isa best_isa() {
  static const Isa best = isa_supported(Isa::kAvx512Vnni) ? Isa::kAvx512Vnni
                          : isa_supported(Isa::kAvx512)   ? Isa::kAvx512
                          : isa_supported(Isa::kAvx2)     ? Isa::kAvx2
                                                          : Isa::kScalar;
  return best;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx512Vnni:
      return "avx512-vnni";
  }
  return "?";
}

const IsaKernels& isa_kernels(Isa isa) {
  LM_CHECK_MSG(isa_supported(isa), "ISA not supported by this CPU");
  switch (isa) {
    case Isa::kScalar:
      return scalar_kernels();
    case Isa::kAvx2:
      return avx2_kernels();
    case Isa::kAvx512:
      return avx512_kernels();
    case Isa::kAvx512Vnni:
      return avx512_vnni_kernels();
  }
  LM_CHECK(false);
}

}  // namespace lm::kernels
