// The text side of one generated sequence: incremental token texts (TGI's detokenization with
// special tokens kept), stop-sequence matching across tokens, and the final generated_text
// (special tokens skipped, prompt prepended when return_full_text). Used by the sinks on the
// engine thread; not thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/token_sink.h"
#include "server/text/generated_sequence.h"
#include "server/text/stop_sequences.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace lm {

struct SequenceTextOptions {
  std::string inputs;  // the prompt text (for return_full_text)
  bool return_full_text = false;
  std::vector<std::string> stop;
};

class SequenceText {
 public:
  SequenceText(const Tokenizer& tokenizer, std::vector<int32_t> prompt_ids,
               SequenceTextOptions options);

  struct Step {
    ResponseToken token;
    std::vector<ResponseToken> top_tokens;
    std::optional<FinishReason> finish_reason;  // engine's (length/EOS) or a stop sequence
  };
  // Adds one engine token; TGI's precedence: length, then EOS, then stop sequences.
  Step add(const TokenEvent& event);

  // The finished sequence as the response reports it.
  GeneratedSequence result(FinishReason reason, std::optional<uint64_t> seed) const;
  uint32_t num_generated() const { return static_cast<uint32_t>(tokens_.size()); }
  // Mean logprob of the generated tokens (best_of ranks candidates by it).
  double mean_logprob() const;
  uint32_t input_length() const { return static_cast<uint32_t>(prompt_ids_.size()); }
  const std::vector<int32_t>& prompt_ids() const { return prompt_ids_; }

 private:
  ResponseToken response_token(int32_t id, float logprob, std::string text) const;
  // details.prefill from the first token's prompt logprobs (SampleResult::prompt_logprobs).
  void add_prefill(const std::vector<float>& logprobs);

  const Tokenizer& tokenizer_;
  std::vector<int32_t> prompt_ids_;
  SequenceTextOptions options_;
  StreamDecoder decoder_;
  StopSequenceMatcher stops_;
  std::vector<int32_t> generated_ids_;
  std::vector<ResponseToken> tokens_;
  std::vector<std::vector<ResponseToken>> top_tokens_;
  std::vector<ResponsePrefillToken> prefill_;
};

}  // namespace lm
