// A token chosen for a sequence with its logprob and the top alternatives, as the executor
// reports it to the engine and the engine to the request's TokenSink.
#pragma once

#include <cstdint>
#include <vector>

namespace lm {

struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0.0f;
};

struct SampleResult {
  int32_t id = 0;
  float logprob = 0.0f;  // log-softmax of the processed scores at id; -inf if it was filtered
  // The top_n_tokens best by processed logprob, best first (ties by lower id), plus every token
  // tied with the n-th (TGI), so it may hold more than n; -inf tokens are never listed.
  std::vector<TokenLogprob> top_tokens;
  // On a prompt_logprobs request's first token only: for each prompt token i >= 1, in order, the
  // log-softmax of the raw (unprocessed) logits at position i - 1 at that token (TGI's prefill
  // logprobs; prompt token 0 has none).
  std::vector<float> prompt_logprobs;
  // With prompt_logprobs, when the request set prompt_top_n_tokens: the best alternatives at each
  // of those positions (same indexing; chosen as top_tokens is, from the raw log-softmax).
  std::vector<std::vector<TokenLogprob>> prompt_top_tokens;
};

}  // namespace lm
