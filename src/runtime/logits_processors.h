// The logit processors TGI applies before choosing a token (spec §10), as functions over one
// sequence's float scores, changed in place. Filtered tokens become -inf. Every function expects
// scores without NaN or +inf (see sanitize_scores) and keeps them that way.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace lm {

// Occurrences of each token id among a sequence's prompt and generated ids.
using TokenCountMap = std::unordered_map<int32_t, int32_t>;

// Reusable buffers so that a step allocates nothing once warm.
struct ProcessorScratch {
  std::vector<int32_t> ids;
  std::vector<float> probs;            // by token id
  std::vector<float> values;           // by token id
  std::vector<double> stretch_totals;  // Sampler::draw's running totals
};

// Log-softmax of a score vector: logprob(x) = x - max - log_sum. When every score is -inf,
// max is -inf, argmax is 0 (torch.argmax's answer) and every logprob is -inf.
struct LogSoftmax {
  float max = 0.0f;
  int32_t argmax = 0;    // lowest id holding max
  double sum_exp = 0.0;  // sum over ids of exp(x - max) (ops::sum_exp)
  float log_sum = 0.0f;  // log(sum_exp)
  float logprob(float score) const;
};

// NaN -> -inf (a broken logit must never win), +inf -> the largest float (so softmax stays
// defined and ties among +inf logits stay ties).
void sanitize_scores(std::span<float> scores);

LogSoftmax log_softmax_of(std::span<const float> scores);

// HF RepetitionPenaltyLogitsProcessor: once per distinct id, positive scores are divided by the
// penalty, negative ones multiplied. Ids outside the vocab are skipped (as HF does).
void apply_repetition_penalty(std::span<float> scores, const TokenCountMap& counts, float penalty);

// TGI's HeterogeneousFrequencyPenaltyLogitsProcessor: score -= frequency_penalty * count / num_ids
// - presence_penalty * (count > 0), counting over prompt + generated ids (num_ids of them).
void apply_frequency_presence_penalty(std::span<float> scores, const TokenCountMap& counts,
                                      int64_t num_ids, float frequency_penalty,
                                      float presence_penalty);

// A grammar's token bitmask (bit id % 32 of word id / 32 set: id allowed): every other score
// becomes -inf, as do ids past the mask's end.
void apply_token_bitmask(std::span<float> scores, std::span<const int32_t> bitmask);

// HF TemperatureLogitsWarper: divide by the temperature.
void apply_temperature(std::span<float> scores, float temperature);

// HF TopKLogitsWarper: keep every score >= the k-th largest (so ties at the boundary all stay).
void apply_top_k(std::span<float> scores, int32_t top_k, ProcessorScratch& scratch);

// HF TopPLogitsWarper: sort ascending, drop positions whose cumulative probability is <= 1 - top_p,
// always keep the best one. NOTE: among tied scores at the cut the lower ids drop first, as with
// torch.sort on CUDA (stable radix sort); on CPU past 16 elements torch's order of ties is an
// accident of its introsort, so HF-on-CPU can differ there.
void apply_top_p(std::span<float> scores, float top_p, ProcessorScratch& scratch);

// HF TypicalLogitsWarper: rank by |-log p - entropy|, keep the smallest-ranked prefix whose mass
// reaches typical_p plus every token tied with its last rank value.
void apply_typical_p(std::span<float> scores, float typical_p, ProcessorScratch& scratch);

}  // namespace lm
