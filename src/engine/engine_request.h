// What the engine needs to run one request: prompt ids, sampling and stopping rules. Plain
// data, already validated by the server.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/sampling_params.h"

namespace lm {

struct EngineRequest {
  std::vector<int32_t> prompt_ids;
  SamplingParams sampling;
  int64_t max_new_tokens = 1;
  bool ignore_eos = false;  // warm-up and benchmarks only
  // False skips the prefix cache lookup so the whole prompt is computed (TGI does so for
  // requests that return prompt logprobs).
  bool use_prefix_cache = true;
};

}  // namespace lm
