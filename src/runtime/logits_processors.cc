// The processors follow HF transformers' warpers (and TGI's heterogeneous versions) operation by
// operation, so that boundary decisions (ties, cumulative sums equal to the threshold) match.
#include "runtime/logits_processors.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>

#include "base/check.h"
#include "ops/logit_scans.h"

namespace lm {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kMaxFloat = std::numeric_limits<float>::max();

// Finds the first rank, in the order `before` ranks `ids`, at which `stop(rank, mass_before,
// prob)` holds, where mass_before is the probability of all better-ranked ids; `stop` must be
// monotone in rank. Reorders ids so that ids[0, rank) are exactly the better ranks (unsorted)
// and ids[rank] is the stopping one. Quickselect halving plus a final sort of <= 64 ids: expected
// O(n), where top-p over a flat distribution would otherwise sort the whole vocab.
template <class Before, class Stop>
size_t first_stop_rank(std::vector<int32_t>& ids, const std::vector<float>& probs, Before before,
                       Stop stop) {
  constexpr size_t kSortBelow = 64;
  auto at = [&](size_t i) { return ids.begin() + static_cast<std::ptrdiff_t>(i); };
  size_t lo = 0;           // ids[0, lo) rank before every id in [lo, n) and do not stop
  size_t hi = ids.size();  // the stopping rank, if any, is in [lo, hi) or is hi == n (none)
  bool hi_stops = false;   // whether ids[hi - 1] is known to stop
  double mass_before = 0.0;
  while (hi - lo > kSortBelow) {
    const size_t mid = lo + (hi - lo) / 2;
    std::nth_element(at(lo), at(mid), at(hi), before);
    double mass_mid = mass_before;
    for (size_t i = lo; i < mid; ++i) mass_mid += probs[static_cast<size_t>(ids[i])];
    const float prob_mid = probs[static_cast<size_t>(ids[mid])];
    if (stop(mid, mass_mid, prob_mid)) {
      hi = mid + 1;
      hi_stops = true;
    } else {
      mass_before = mass_mid + prob_mid;
      lo = mid + 1;
    }
  }
  std::sort(at(lo), at(hi), before);
  for (size_t rank = lo; rank < hi; ++rank) {
    const float prob = probs[static_cast<size_t>(ids[rank])];
    if (stop(rank, mass_before, prob)) return rank;
    mass_before += prob;
  }
  // Summing in another order can flip a decision that sat exactly on the threshold.
  return hi_stops ? hi - 1 : ids.size();
}

// Ids whose score is finite (the others are already filtered and carry no probability).
void collect_finite_ids(std::span<const float> scores, std::vector<int32_t>& ids) {
  ids.clear();
  for (size_t i = 0; i < scores.size(); ++i) {
    if (scores[i] != kNegInf) ids.push_back(static_cast<int32_t>(i));
  }
}

float clamp_high(float x) { return std::min(x, kMaxFloat); }

}  // namespace

float LogSoftmax::logprob(float score) const {
  if (max == kNegInf) return kNegInf;
  return (score - max) - log_sum;
}

// The scans over the whole vocabulary run once per sampled token while the pool's other threads
// wait, so they are the vector kernels' (ops/logit_scans.h; with libm's exp the sum alone took 7%
// of SmolLM2's decode).
void sanitize_scores(std::span<float> scores) { ops::sanitize_scores(scores); }

LogSoftmax log_softmax_of(std::span<const float> scores) {
  LogSoftmax out;
  out.max = kNegInf;
  const int64_t argmax = ops::first_max(scores);
  if (argmax < 0) {
    out.log_sum = kNegInf;
    return out;
  }
  out.argmax = static_cast<int32_t>(argmax);
  out.max = scores[static_cast<size_t>(argmax)];
  out.sum_exp = ops::sum_exp(scores, out.max);
  out.log_sum = static_cast<float>(std::log(out.sum_exp));
  return out;
}

void apply_repetition_penalty(std::span<float> scores, const TokenCountMap& counts, float penalty) {
  LM_CHECK(penalty > 0.0f);
  for (const auto& [id, count] : counts) {
    if (static_cast<size_t>(id) >= scores.size()) continue;
    float& x = scores[static_cast<size_t>(id)];
    x = clamp_high(x < 0.0f ? x * penalty : x / penalty);
  }
}

void apply_frequency_presence_penalty(std::span<float> scores, const TokenCountMap& counts,
                                      int64_t num_ids, float frequency_penalty,
                                      float presence_penalty) {
  if (num_ids <= 0) return;
  for (const auto& [id, count] : counts) {
    if (static_cast<size_t>(id) >= scores.size()) continue;
    float& x = scores[static_cast<size_t>(id)];
    const float frequency = static_cast<float>(count) / static_cast<float>(num_ids);
    x -= frequency * frequency_penalty;
    x -= presence_penalty;
    x = clamp_high(x);
  }
}

void apply_token_bitmask(std::span<float> scores, std::span<const int32_t> bitmask) {
  const size_t num_allowed = std::min(scores.size(), bitmask.size() * 32);
  for (size_t word_idx = 0; word_idx * 32 < num_allowed; ++word_idx) {
    const auto word = static_cast<uint32_t>(bitmask[word_idx]);
    if (word == 0xffffffffu) continue;
    const size_t end = std::min(num_allowed, (word_idx + 1) * 32);
    for (size_t i = word_idx * 32; i < end; ++i) {
      if (((word >> (i % 32)) & 1u) == 0) scores[i] = kNegInf;
    }
  }
  std::fill(scores.begin() + static_cast<std::ptrdiff_t>(num_allowed), scores.end(), kNegInf);
}

void apply_temperature(std::span<float> scores, float temperature) {
  LM_CHECK(temperature > 0.0f);
  for (float& x : scores) x = clamp_high(x / temperature);
}

void apply_top_k(std::span<float> scores, int32_t top_k, ProcessorScratch& scratch) {
  const size_t k = static_cast<size_t>(std::max(top_k, 0));
  if (k == 0 || k >= scores.size()) return;
  auto& values = scratch.values;
  float kth_value;
  if (k <= scores.size() / 16) {
    // Min-heap of the k largest so far: one pass, and the heap is rarely touched.
    const auto greater = std::greater<float>();
    values.assign(scores.begin(), scores.begin() + static_cast<std::ptrdiff_t>(k));
    std::make_heap(values.begin(), values.end(), greater);
    for (size_t i = k; i < scores.size(); ++i) {
      if (scores[i] <= values.front()) continue;
      std::pop_heap(values.begin(), values.end(), greater);
      values.back() = scores[i];
      std::push_heap(values.begin(), values.end(), greater);
    }
    kth_value = values.front();
  } else {
    values.assign(scores.begin(), scores.end());
    auto kth = values.begin() + static_cast<std::ptrdiff_t>(k - 1);
    std::nth_element(values.begin(), kth, values.end(), std::greater<float>());
    kth_value = *kth;
  }
  for (float& x : scores) {
    if (x < kth_value) x = kNegInf;
  }
}

void apply_top_p(std::span<float> scores, float top_p, ProcessorScratch& scratch) {
  const LogSoftmax norm = log_softmax_of(scores);
  if (norm.max == kNegInf) return;
  auto& ids = scratch.ids;
  auto& probs = scratch.probs;
  collect_finite_ids(scores, ids);
  probs.resize(scores.size());
  double total = 0.0;
  for (int32_t id : ids) {
    const float p = static_cast<float>(std::exp(scores[id] - norm.max) / norm.sum_exp);
    probs[static_cast<size_t>(id)] = p;
    total += p;
  }
  // HF walks ascending (stable: lower id first among ties) and drops while the cumulative sum is
  // <= 1 - top_p; we rank the same order backwards, from the best token, and find the first
  // position HF would drop. The float 1 - top_p is TGI's (a tensor of the model dtype).
  const float opposite = 1.0f - top_p;
  const size_t num_kept = first_stop_rank(
      ids, probs,
      [&](int32_t a, int32_t b) {
        return scores[a] > scores[b] || (scores[a] == scores[b] && a > b);
      },
      [&](size_t rank, double mass_before, float) {
        return rank > 0 && static_cast<float>(total - mass_before) <= opposite;
      });
  for (size_t rank = num_kept; rank < ids.size(); ++rank) scores[ids[rank]] = kNegInf;
}

void apply_typical_p(std::span<float> scores, float typical_p, ProcessorScratch& scratch) {
  const LogSoftmax norm = log_softmax_of(scores);
  if (norm.max == kNegInf) return;
  auto& ids = scratch.ids;
  auto& probs = scratch.probs;
  auto& shifted = scratch.values;  // |-log p - entropy| by id; only finite ids are read
  collect_finite_ids(scores, ids);
  probs.resize(scores.size());
  shifted.resize(scores.size());
  double neg_entropy = 0.0;
  for (int32_t id : ids) {
    const float logprob = norm.logprob(scores[id]);
    neg_entropy += static_cast<double>(logprob) * std::exp(logprob);
    probs[static_cast<size_t>(id)] =
        static_cast<float>(std::exp(scores[id] - norm.max) / norm.sum_exp);
  }
  const float entropy = static_cast<float>(-neg_entropy);
  for (int32_t id : ids) shifted[id] = std::fabs(-norm.logprob(scores[id]) - entropy);

  const size_t last = first_stop_rank(
      ids, probs,
      [&](int32_t a, int32_t b) {
        return shifted[a] < shifted[b] || (shifted[a] == shifted[b] && a < b);
      },
      [&](size_t, double mass_before, float prob) {
        return static_cast<float>(mass_before + prob) >= typical_p;
      });
  // The mass never reached typical_p (rounding): HF's index clamps to the end and keeps all.
  if (last == ids.size()) return;
  // Cut by value, not position: every token ranked equal to the last kept one stays.
  const float threshold = shifted[ids[last]];
  for (int32_t id : ids) {
    if (shifted[id] > threshold) scores[id] = kNegInf;
  }
}

}  // namespace lm
