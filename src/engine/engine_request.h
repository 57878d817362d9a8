// What the engine needs to run one request: prompt ids, sampling and stopping rules. Plain
// data, already validated by the server.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/sampling_params.h"
#include "grammar/compiled_grammar.h"

namespace lm {

// Prompt tokens per step of a prompt_logprobs request: bounds its logits rows (x vocab floats).
inline constexpr int64_t kPromptLogprobChunk = 512;

struct EngineRequest {
  std::vector<int32_t> prompt_ids;
  SamplingParams sampling;
  int64_t max_new_tokens = 1;
  bool ignore_eos = false;  // warm-up and benchmarks only
  // False skips the prefix cache lookup so the whole prompt is computed (TGI does so for
  // requests that return prompt logprobs).
  bool use_prefix_cache = true;
  // TGI's prefill details: the first sampled token also carries the log-softmax of the raw logits
  // at each prompt token after the first (SampleResult::prompt_logprobs). Needs the whole prompt
  // computed, so it comes with use_prefix_cache = false; its prompt is computed in chunks of at
  // most kPromptLogprobChunk tokens, each holding one vocabulary-wide row of logits per token.
  bool prompt_logprobs = false;
  // With prompt_logprobs: this many best alternatives per prompt position too
  // (SampleResult::prompt_top_tokens; OpenAI completions' echo with logprobs). 0: none.
  int32_t prompt_top_n_tokens = 0;
  // Constrained decoding: the generated tokens must match this grammar (null: unconstrained).
  // Compiled at admission; the executor's sampler masks each step's logits with it.
  std::shared_ptr<const CompiledGrammar> grammar;
};

}  // namespace lm
