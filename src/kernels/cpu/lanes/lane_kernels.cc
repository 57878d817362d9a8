// The one registration of the ops written once against the lane policies: each instantiated with
// this ISA's policies into its kernel table. Built once per vector ISA with that ISA's flags and
// LM_LANE_ISA naming it (kernels/cpu/CMakeLists.txt), so a new op is one line here and a new ISA
// one line there (plus its policy, and its place in lanes::Widest, in lane_math.h and its
// declaration in lane_kernels.h).
// NOTE: everything instantiated here must have internal linkage (lane_math.h says why).
#include "kernels/cpu/lanes/lane_kernels.h"

#ifndef LM_LANE_ISA
#error "built only through lm_lane_kernels() in kernels/cpu/CMakeLists.txt"
#endif

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

// GCC 12's AVX-512 intrinsics initialise their "undefined" vectors from themselves (GCC PR
// 105593), which -Wuninitialized reports at every use; the warning is about the header only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "kernels/cpu/attention_rows.h"
#include "kernels/cpu/lane_math.h"
#include "kernels/cpu/lanes/gemm_panel.h"
#include "kernels/cpu/lanes/gemm_tile.h"
#include "kernels/cpu/lanes/panels16.h"
#include "kernels/cpu/lanes/panels_fp8.h"
#include "kernels/cpu/lanes/score_scans.h"
#include "kernels/cpu/lanes/silu_mul.h"
#include "kernels/cpu/lanes/sum_exp.h"
#include "kernels/cpu/lanes/vector_f32.h"

namespace lm::kernels::LM_LANE_ISA {
namespace {

// Wide: this ISA's widest lanes. The memory-bound ops (fp32 dot, axpy, scale, and the 16-bit
// panels' decode dot, which streams one 16-row panel at a time: as two chains of 8 lanes it ran
// faster than as one of 16) gain nothing from 16 lanes and the split decode attention puts
// positions in 8 lanes (attention_rows.h): those come once, with the 8-lane table, and the wider
// tables inherit them (so the same code and bits).
template <typename Wide>
void add(IsaKernels& kernels) {
  kernels.gemm_tile = lanes::gemm_tile<Wide>;
  if constexpr (lanes::PanelLanes<Wide>) kernels.gemm_panel = lanes::gemm_panel<Wide>;
  kernels.silu_mul = lanes::silu_mul<Wide>;
  kernels.gelu_tanh_mul = lanes::gelu_tanh_mul<Wide>;
  kernels.sum_exp = lanes::sum_exp<Wide>;
  kernels.sanitize_scores = lanes::sanitize_scores<Wide>;
  kernels.first_max = lanes::first_max<Wide>;
  kernels.attend_rows = attention_rows::attend_any<Wide>;
  kernels.attend_rows_softcapped = attention_rows::attend_softcapped_any<Wide>;
  kernels.panel16_unpack = lanes::panel16_unpack<Wide>;
  kernels.panel16_gemm = lanes::panel16_gemm<Wide>;
  kernels.panel16_direct_gemm = lanes::panel16_direct_gemm<Wide>;
  kernels.panel16_direct_max_rows = lanes::kPanel16DirectMaxRows<Wide>;
  kernels.fp8_panel_dot = lanes::fp8_panel_dot<Wide>;
  kernels.fp8_panel_unpack = lanes::fp8_panel_unpack<Wide>;
  if constexpr (Wide::kLanes == 8) {
    kernels.panel16_dot = lanes::panel16_dot<Wide>;
    kernels.dot_f32 = lanes::dot_f32<Wide>;
    kernels.axpy_f32 = lanes::axpy_f32<Wide>;
    kernels.scale_f32 = lanes::scale_f32<Wide>;
    kernels.attend_scores = attention_rows::scores_any;
    kernels.attend_values = attention_rows::values_any;
    kernels.decode_kv = attention_rows::decode_kv_any;
    kernels.encode_kv = attention_rows::encode_kv_any;
    kernels.attend_rows_kv = attention_rows::attend_decode_kv;
  }
}

}  // namespace

void add_lane_kernels(IsaKernels& kernels) { add<lanes::Widest>(kernels); }

}  // namespace lm::kernels::LM_LANE_ISA

#pragma GCC diagnostic pop

#else  // No vector flags in this build (not x86): isa_supported() keeps these tables unused.

namespace lm::kernels::LM_LANE_ISA {
void add_lane_kernels(IsaKernels&) {}
}  // namespace lm::kernels::LM_LANE_ISA

#endif
