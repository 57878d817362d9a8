// Single-sequence generation: prefill the prompt, then sample one token per step until
// max_new_tokens, an EOS id, or the caller says stop (TGI's order: length, then EOS, then stop
// sequences). The batching engine generalizes this loop to many sequences in its own issue.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "base/result.h"
#include "base/thread_pool.h"
#include "engine/finish_reason.h"
#include "engine/sampling_params.h"
#include "model/llama_model.h"
#include "runtime/sampler.h"

namespace lm {

struct GenerationRequest {
  std::vector<int32_t> prompt_ids;
  SamplingParams sampling;
  int64_t max_new_tokens = 20;
  std::vector<int32_t> eos_token_ids;  // empty: the model's
  bool ignore_eos = false;
};

struct GenerationResult {
  std::vector<SampleResult> tokens;
  FinishReason finish_reason = FinishReason::kLength;
};

class Generator {
 public:
  Generator(LlamaModel& model, ThreadPool& pool) : model_(model), pool_(pool) {}

  // Calls on_token after each new token; returning false ends generation with kStopSequence.
  Result<GenerationResult> generate(const GenerationRequest& request,
                                    const std::function<bool(const SampleResult&)>& on_token = {});

 private:
  LlamaModel& model_;
  ThreadPool& pool_;
};

}  // namespace lm
