// Why a sequence stopped, in TGI's precedence: length, then EOS, then a stop sequence.
#pragma once

namespace lm {

enum class FinishReason { kLength, kEosToken, kStopSequence };

// TGI's wire names: "length", "eos_token", "stop_sequence".
inline const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength:
      return "length";
    case FinishReason::kEosToken:
      return "eos_token";
    case FinishReason::kStopSequence:
      return "stop_sequence";
  }
  return "length";
}

}  // namespace lm
