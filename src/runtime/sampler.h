// Chooses one sequence's next token from its logits: TGI's processor chain (spec §10), then argmax
// or a seeded draw, plus the reported logprob and top-n alternatives. Owns the sequence's
// generator and token counts, so a step costs O(vocab), not O(vocab * length).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/sampled_token.h"
#include "engine/sampling_params.h"
#include "runtime/logits_processors.h"
#include "runtime/random.h"

namespace lm {

// TGI's top_n_tokens of one row: the n best ids by score (ties: lower id) plus every id tied with
// the n-th, as logprobs under `norm`, best first; -inf ids are never listed. `heap` is scratch.
std::vector<TokenLogprob> top_n_logprobs(std::span<const float> scores, const LogSoftmax& norm,
                                         size_t n, std::vector<int32_t>& heap);

class Sampler {
 public:
  Sampler(const SamplingParams& params, std::span<const int32_t> prompt_ids);

  // Records a token appended to the sequence (counted by the penalties from the next step on).
  void observe(int32_t id);

  // Processes `logits` in place (they end as the processed scores) and picks the next token.
  // NaN logits count as -inf; if every logit is -inf the answer is id 0 with logprob -inf.
  // `token_bitmask` (a grammar's allowed ids, bit id % 32 of word id / 32; empty: no grammar)
  // masks the scores after the penalties and before the warpers, TGI's order.
  SampleResult sample(std::span<float> logits, std::span<const int32_t> token_bitmask = {});

  // The uniform in [0, 1) the next random draw takes from this sequence's generator, for a
  // device sampler that draws from processed scores itself (the generator advances as one
  // sample() of a random row advances it).
  double next_uniform() { return random_.next_double(); }

  // Whether the choice is random: do_sample, or any warper set (TGI flips to sampling then).
  bool is_random() const { return is_random_; }

 private:
  int32_t draw(std::span<const float> scores, const LogSoftmax& norm);

  SamplingParams params_;
  bool is_random_;
  Random random_;
  TokenCountMap counts_;  // prompt + observed ids
  int64_t num_ids_ = 0;
  ProcessorScratch scratch_;
};

}  // namespace lm
