#include "model/rope_frequencies.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace lm {
namespace {

// 1 / base^(2i/dim) in fp32, as torch computes `1.0 / (base ** (arange(0, dim, 2).float() / dim))`.
std::vector<float> default_inv_freq(double base, int64_t dim) {
  std::vector<float> inv_freq(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    inv_freq[static_cast<size_t>(i)] = 1.0f / std::pow(static_cast<float>(base), exponent);
  }
  return inv_freq;
}

// YaRN as transformers' _compute_yarn_parameters computes it: fp32 tensors, Python doubles for the
// scalars. The same for every position (no dependence on the sequence length).
// NOTE llama.cpp (ggml's rope_yarn + ggml_rope_yarn_corr_dims) agrees on the correction range
// (always truncated: floor / ceil, clamped to [0, dim - 1]) and on the blend, which it applies to
// the angles instead of the frequencies (the same, as both are linear in the position); it
// differs where transformers follows the config: llama.cpp takes beta_fast / beta_slow and the
// attention factor from GGUF for a few architectures only (not Llama / Qwen2), guards an empty
// ramp with max(0.001, high - low) instead of high + 0.001, and its cos/sin scale is
// 0.1 * ln(factor) + 1 (times mscale ratios for DeepSeek) whatever attention_factor says.
RopeFrequencies yarn_frequencies(const RopeConfig& rope, int64_t dim) {
  const double base = rope.theta, factor = rope.factor;
  const auto trained = static_cast<double>(rope.original_max_position_embeddings);
  // The dimension at which a frequency turns `rotations` times over the trained length.
  const auto correction_dim = [&](double rotations) {
    return static_cast<double>(dim) * std::log(trained / (rotations * 2 * std::numbers::pi)) /
           (2 * std::log(base));
  };
  double low = correction_dim(rope.beta_fast), high = correction_dim(rope.beta_slow);
  if (rope.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // transformers' guard against a zero-width ramp
  const auto ramp_begin = static_cast<float>(low), ramp_width = static_cast<float>(high - low);
  RopeFrequencies out;
  out.inv_freq.resize(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    const float pos_freq = std::pow(static_cast<float>(base), exponent);
    const float extrapolated = 1.0f / pos_freq;
    const float interpolated = 1.0f / (static_cast<float>(factor) * pos_freq);
    const float ramp = std::clamp((static_cast<float>(i) - ramp_begin) / ramp_width, 0.0f, 1.0f);
    const float keep = 1.0f - ramp;  // the share of the extrapolated (unscaled) frequency
    out.inv_freq[static_cast<size_t>(i)] = interpolated * (1.0f - keep) + extrapolated * keep;
  }
  const auto get_mscale = [&](double mscale) {
    return factor <= 1 ? 1.0 : 0.1 * mscale * std::log(factor) + 1.0;
  };
  double attention = get_mscale(1.0);
  if (rope.attention_factor) {
    attention = *rope.attention_factor;
  } else if (rope.mscale != 0 && rope.mscale_all_dim != 0) {
    attention = get_mscale(rope.mscale) / get_mscale(rope.mscale_all_dim);
  }
  out.attention_scaling = static_cast<float>(attention);
  return out;
}

}  // namespace

RopeFrequencies rope_frequencies(const ModelConfig& config, int64_t seq_len,
                                 const std::vector<float>& freq_factors) {
  return rope_frequencies(config, config.rope, seq_len, freq_factors);
}

RopeFrequencies rope_frequencies(const ModelConfig& config, const RopeConfig& rope, int64_t seq_len,
                                 const std::vector<float>& freq_factors) {
  const int64_t dim = config.rotary_dims();
  RopeFrequencies out;
  switch (rope.type) {
    case RopeType::kDefault:
      out.inv_freq = default_inv_freq(rope.theta, dim);
      break;
    case RopeType::kLinear:
      out.inv_freq = default_inv_freq(rope.theta, dim);
      for (float& f : out.inv_freq) f /= static_cast<float>(rope.factor);
      break;
    case RopeType::kDynamic: {
      // NTK-aware: past the trained length the base grows with the sequence (HF semantics:
      // recomputed per forward from the furthest position it reaches).
      const int64_t trained = rope.original_max_position_embeddings > 0
                                  ? rope.original_max_position_embeddings
                                  : config.max_position_embeddings;
      double base = rope.theta;
      if (seq_len > trained) {
        const double ratio =
            rope.factor * static_cast<double>(seq_len) / static_cast<double>(trained) -
            (rope.factor - 1);
        base =
            rope.theta * std::pow(ratio, static_cast<double>(dim) / static_cast<double>(dim - 2));
      }
      out.inv_freq = default_inv_freq(base, dim);
      break;
    }
    case RopeType::kLlama3: {
      // Long wavelengths are slowed by `factor`, short ones kept, the band between interpolated.
      out.inv_freq = default_inv_freq(rope.theta, dim);
      const auto old_len = static_cast<float>(rope.original_max_position_embeddings);
      const auto factor = static_cast<float>(rope.factor);
      const auto low = static_cast<float>(rope.low_freq_factor);
      const auto high = static_cast<float>(rope.high_freq_factor);
      const float low_freq_wavelen = old_len / low;
      const float high_freq_wavelen = old_len / high;
      for (float& f : out.inv_freq) {
        const float wavelen = 2.0f * std::numbers::pi_v<float> / f;
        float scaled = wavelen > low_freq_wavelen ? f / factor : f;
        if (!(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen)) {
          const float smooth = (old_len / wavelen - low) / (high - low);
          scaled = (1.0f - smooth) * scaled / factor + smooth * scaled;
        }
        f = scaled;
      }
      break;
    }
    case RopeType::kLongRope: {
      // transformers: the long factors for a forward whose furthest position passes the trained
      // length, the short ones otherwise; 1 / (ext * base^(2i/dim)) in fp32.
      const bool long_context = seq_len > rope.original_max_position_embeddings;
      const std::vector<double>& ext = long_context ? rope.long_factor : rope.short_factor;
      out.inv_freq.resize(static_cast<size_t>(dim / 2));
      for (int64_t i = 0; i < dim / 2; ++i) {
        const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
        const float base = std::pow(static_cast<float>(rope.theta), exponent);
        out.inv_freq[static_cast<size_t>(i)] =
            1.0f / (static_cast<float>(ext[static_cast<size_t>(i)]) * base);
      }
      double attention = 1.0;
      if (rope.attention_factor) {
        attention = *rope.attention_factor;
      } else if (rope.factor > 1.0) {
        attention = std::sqrt(
            1.0 + std::log(rope.factor) /
                      std::log(static_cast<double>(rope.original_max_position_embeddings)));
      }
      out.attention_scaling = static_cast<float>(attention);
      break;
    }
    case RopeType::kYarn:
      out = yarn_frequencies(rope, dim);
      break;
  }
  if (!freq_factors.empty()) {
    for (size_t i = 0; i < out.inv_freq.size() && i < freq_factors.size(); ++i)
      out.inv_freq[i] /= freq_factors[i];
  }
  return out;
}

}  // namespace lm
