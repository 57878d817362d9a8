// Run-time ISA detection (cpuid via the compiler builtins) and the assembly of the per-ISA kernel
// tables.
#include "kernels/cpu/isa.h"

#include "base/check.h"
#include "kernels/cpu/lanes/lane_kernels.h"

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

namespace {

// Each vector table starts from the one below it (AVX2's from the scalar reference) and is built
// once, on first use.
const IsaKernels& avx2_kernels() {
  static const IsaKernels kKernels = [] {
    IsaKernels kernels = scalar_kernels();
    add_avx2_kernels(kernels);
    avx2::add_lane_kernels(kernels);
    return kernels;
  }();
  return kKernels;
}

// AVX-512F: the compute-bound lane ops on 16 lanes (GEMM tile and panel, attention rows, the
// exps); the memory-bound ones and everything else stay AVX2's.
const IsaKernels& avx512_kernels() {
  static const IsaKernels kKernels = [] {
    IsaKernels kernels = avx2_kernels();
    avx512::add_lane_kernels(kernels);
    return kernels;
  }();
  return kKernels;
}

const IsaKernels& avx512_vnni_kernels() {
  static const IsaKernels kKernels = [] {
    IsaKernels kernels = avx512_kernels();
    add_avx512_vnni_kernels(kernels);
    return kernels;
  }();
  return kKernels;
}

}  // namespace

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
