// Order of the chain and the greedy/random decision follow TGI's HeterogeneousNextTokenChooser.
#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/check.h"

namespace lm {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

}  // namespace

Sampler::Sampler(const SamplingParams& params, std::span<const int32_t> prompt_ids)
    : params_(params),
      // NOTE: TGI turns do_sample on for a request whenever one of its warpers is active, so a
      // "greedy" request with temperature 0.7 samples there; we do the same to stay a drop-in.
      is_random_(params.is_random()),
      random_(params.seed) {
  LM_CHECK(params.temperature > 0.0f);
  LM_CHECK(params.repetition_penalty > 0.0f);
  LM_CHECK(params.top_k >= 0);
  LM_CHECK(params.top_n_tokens >= 0);
  for (int32_t id : prompt_ids) observe(id);
}

void Sampler::observe(int32_t id) {
  LM_CHECK(id >= 0);
  ++counts_[id];
  ++num_ids_;
}

SampleResult Sampler::sample(std::span<float> logits, std::span<const int32_t> token_bitmask) {
  LM_CHECK(!logits.empty());
  sanitize_scores(logits);
  for (const auto& [id, bias] : params_.logit_bias) {
    // An id past the logits (a tokenizer larger than the model's head) has no logit to move.
    if (id >= 0 && static_cast<size_t>(id) < logits.size()) logits[static_cast<size_t>(id)] += bias;
  }
  if (params_.repetition_penalty != 1.0f) {
    apply_repetition_penalty(logits, counts_, params_.repetition_penalty);
  }
  if (params_.frequency_penalty != 0.0f || params_.presence_penalty != 0.0f) {
    apply_frequency_presence_penalty(logits, counts_, num_ids_, params_.frequency_penalty,
                                     params_.presence_penalty);
  }
  if (!token_bitmask.empty()) apply_token_bitmask(logits, token_bitmask);
  if (params_.temperature != 1.0f) apply_temperature(logits, params_.temperature);
  if (params_.top_k != 0) apply_top_k(logits, params_.top_k, scratch_);
  if (params_.top_p < 1.0f) apply_top_p(logits, params_.top_p, scratch_);
  if (params_.typical_p < 1.0f) apply_typical_p(logits, params_.typical_p, scratch_);

  const LogSoftmax norm = log_softmax_of(logits);
  SampleResult result;
  result.id = is_random_ ? draw(logits, norm) : norm.argmax;
  result.logprob = norm.logprob(logits[static_cast<size_t>(result.id)]);
  if (params_.top_n_tokens > 0) {
    result.top_tokens =
        top_n_logprobs(logits, norm, static_cast<size_t>(params_.top_n_tokens), scratch_.ids);
  }
  return result;
}

// Inverse-CDF draw over the ids in id order. The target is a fraction of the very sum the running
// total ends at (summed here in id order: norm.sum_exp, a vector sum, may differ in its last
// bits), so every id gets exactly its weight's share. The first pass keeps the running total at
// the end of each stretch of ids; the stretch that passes the target is walked again from there
// with the same additions in the same order, so its running totals are the same bits.
int32_t Sampler::draw(std::span<const float> scores, const LogSoftmax& norm) {
  if (norm.max == kNegInf) return norm.argmax;
  constexpr size_t kStretch = 256;
  std::vector<double>& ends = scratch_.stretch_totals;
  ends.clear();
  double cumulative = 0.0;
  int32_t last_possible = norm.argmax;
  for (size_t i = 0; i < scores.size(); ++i) {
    const float weight = std::exp(scores[i] - norm.max);
    if (weight != 0.0f) last_possible = static_cast<int32_t>(i);
    cumulative += weight;
    if ((i + 1) % kStretch == 0 || i + 1 == scores.size()) ends.push_back(cumulative);
  }
  const double target = random_.next_double() * cumulative;
  const auto stretch =
      static_cast<size_t>(std::upper_bound(ends.begin(), ends.end(), target) - ends.begin());
  if (stretch == ends.size()) return last_possible;  // target rounded up to the full sum
  double running = stretch == 0 ? 0.0 : ends[stretch - 1];
  const size_t end = std::min(scores.size(), (stretch + 1) * kStretch);
  for (size_t i = stretch * kStretch; i < end; ++i) {
    running += std::exp(scores[i] - norm.max);
    if (running > target) return static_cast<int32_t>(i);
  }
  return last_possible;  // not reached: the stretch's total passes the target
}

std::vector<TokenLogprob> top_n_logprobs(std::span<const float> scores, const LogSoftmax& norm,
                                         size_t n, std::vector<int32_t>& heap) {
  n = std::min(n, scores.size());
  if (n == 0) return {};
  auto better = [&](int32_t a, int32_t b) {
    return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);
  };
  // Heap of the n best so far, worst on top; n is small (TGI caps it at 5 by default).
  heap.clear();
  for (size_t i = 0; i < scores.size(); ++i) {
    const auto id = static_cast<int32_t>(i);
    if (heap.size() < n) {
      heap.push_back(id);
      std::push_heap(heap.begin(), heap.end(), better);
    } else if (better(id, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), better);
      heap.back() = id;
      std::push_heap(heap.begin(), heap.end(), better);
    }
  }
  const int32_t nth_id = heap.front();
  // TGI keeps every logprob >= the n-th one; a -inf n-th becomes the lowest float, so filtered
  // tokens never appear even when fewer than n survive.
  const float nth_logprob =
      std::max(norm.logprob(scores[nth_id]), std::numeric_limits<float>::lowest());
  std::vector<TokenLogprob> top;
  for (size_t i = 0; i < scores.size(); ++i) {
    const float logprob = norm.logprob(scores[i]);
    if (logprob >= nth_logprob) top.push_back({static_cast<int32_t>(i), logprob});
  }
  std::sort(top.begin(), top.end(), [](const TokenLogprob& a, const TokenLogprob& b) {
    return a.logprob > b.logprob || (a.logprob == b.logprob && a.id < b.id);
  });
  return top;
}

}  // namespace lm
