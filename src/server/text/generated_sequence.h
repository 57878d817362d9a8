// A generated sequence as both APIs report it: its tokens (with their text and logprobs), the
// alternatives per token, and the finished sequence. Plain data the sinks fill (sequence_text.h)
// and the TGI and OpenAI bodies render.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace lm {

// A generated token. logprob NaN or +-inf is written as null.
struct ResponseToken {
  uint32_t id = 0;
  std::string text;
  float logprob = std::numeric_limits<float>::quiet_NaN();
  bool special = false;
};

// A prompt token (decoder_input_details); the first one has no logprob (NaN -> null).
struct ResponsePrefillToken {
  uint32_t id = 0;
  std::string text;
  float logprob = std::numeric_limits<float>::quiet_NaN();
};

// One finished sequence: the main result, or one of the best_of candidates.
struct GeneratedSequence {
  std::string generated_text;  // already prefixed with the prompt when return_full_text
  std::string finish_reason;   // "length" | "eos_token" | "stop_sequence"
  uint32_t generated_tokens = 0;
  std::optional<uint64_t> seed;  // null for greedy requests
  std::vector<ResponsePrefillToken> prefill;
  std::vector<ResponseToken> tokens;
  std::vector<std::vector<ResponseToken>> top_tokens;  // one list per token; omitted when empty
};

}  // namespace lm
