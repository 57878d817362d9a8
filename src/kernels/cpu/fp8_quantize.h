// TGI's --quantize fp8 on a float checkpoint: each Linear weight to FP8 E4M3 with one scale for
// the whole tensor, as text_generation_server/layers/fp8.py's fp8_quantize does where fbgemm's
// per-row kernels are absent (the CPU, GPUs before Hopper): in the weight's own dtype,
//   scale   = 448 / max(absmax, 1e-12)   (torch: reciprocal(absmax) * 448, each rounded)
//   q       = e4m3(clamp(w * scale, -448, 448))   (the product rounded, then to nearest even)
//   stored  = 1 / scale in fp32                   (what the weights are multiplied by)
// The model then computes with fp8 * stored in fp32 (FP8 panels, panels_fp8.h).
#pragma once

#include <cstdint>

namespace lm::kernels {

// The weight's dtype, whose rounding each step of TGI's arithmetic takes: fp32 (none), bfloat16
// or IEEE half (to nearest even).
enum class Round16 : uint8_t { kNone, kBF16, kF16 };

// The scale for a tensor whose largest |w| is absmax, computed in the weight's dtype (`dtype`:
// kNone for fp32, kBF16, kF16).
float fp8_tensor_scale(float absmax, Round16 dtype);

// One row of k values (the weight's values, exactly, as fp32) as E4M3 bytes at dst.
void quantize_row_fp8(const float* w, int64_t k, float scale, Round16 dtype, uint8_t* dst);

}  // namespace lm::kernels
