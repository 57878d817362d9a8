// Single-sequence generation: prefill the prompt, then sample one token per step until
// max_new_tokens, an EOS id, or the caller says stop (TGI's order: length, then EOS, then stop
// sequences). The batching engine generalizes this loop to many sequences in its own issue.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "base/result.h"
#include "base/thread_pool.h"
#include "engine/engine_request.h"
#include "engine/finish_reason.h"
#include "model/llama_model.h"
#include "runtime/sampler.h"

namespace lm {

struct GenerationResult {
  std::vector<SampleResult> tokens;
  FinishReason finish_reason = FinishReason::kLength;
};

class Generator {
 public:
  Generator(LlamaModel& model, ThreadPool& pool) : model_(model), pool_(pool) {}

  // Runs `request` alone (EOS ids from the model's config). Calls on_token after each new token;
  // returning false ends generation with kStopSequence.
  Result<GenerationResult> generate(const EngineRequest& request,
                                    const std::function<bool(const SampleResult&)>& on_token = {});

 private:
  LlamaModel& model_;
  ThreadPool& pool_;
};

}  // namespace lm
