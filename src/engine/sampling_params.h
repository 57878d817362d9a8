// How one sequence chooses its next token: TGI's NextTokenChooserParameters plus top_n_tokens.
// Plain data; the server validates it (TGI's ranges and messages) before it reaches a Sampler.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace lm {

struct SamplingParams {
  // NOTE: as in TGI's HeterogeneousNextTokenChooser, setting any warper (temperature != 1,
  // top_k != 0, top_p < 1, typical_p < 1) makes the choice random even when do_sample is false.
  bool do_sample = false;
  float temperature = 1.0f;         // > 0; scores are divided by it
  int32_t top_k = 0;                // 0 = off
  float top_p = 1.0f;               // 1 = off
  float typical_p = 1.0f;           // 1 = off
  float repetition_penalty = 1.0f;  // 1 = off; HF/CTRL form over prompt + generated ids
  float frequency_penalty = 0.0f;   // 0 = off; TGI form: -= penalty * count / num_ids
  float presence_penalty = 0.0f;    // 0 = off; -= penalty if the id occurred (TGI routes map
                                    // OpenAI's presence_penalty to repetition_penalty instead)
  uint64_t seed = 0;                // seeds the per-sequence generator
  int32_t top_n_tokens = 0;         // 0 = no alternatives reported
  // OpenAI's logit_bias: (token id, bias) pairs added to the raw logits before every processor
  // (ids in the vocabulary, biases in [-100, 100]: the server checks both).
  std::vector<std::pair<int32_t, float>> logit_bias;

  // Whether the next token is drawn at random: do_sample, or any warper set. The one place that
  // decides it: the sampler draws by it, and the server reports a seed only for such requests.
  bool is_random() const {
    return do_sample || temperature != 1.0f || top_k != 0 || top_p < 1.0f || typical_p < 1.0f;
  }
};

}  // namespace lm
