// StepCostModel: how long an engine step takes, predicted from its batch's shape and fitted online
// from the steps the engine measured. The Scheduler asks it how many prompt tokens a step can
// take within --max-step-latency-ms. Plain data: the engine feeds it seconds; it reads no clock.
#pragma once

#include <array>
#include <cstdint>

namespace lm {

// What a step's time depends on: the rows it pushes through the weights, the rows that sample
// (the LM head and the sampler), and the attention work (key positions each query attends to).
struct StepShape {
  int64_t num_prefill_tokens = 0;   // tokens of entries computing more than their newest token
  int64_t num_decode_rows = 0;      // entries computing just their newest token
  int64_t num_attended_tokens = 0;  // sum over computed tokens of the positions they attend to
  // > 0: a token attends to at most this many positions (EngineConfig::kv_window_tokens).
  int64_t window = 0;

  // Adds an entry of `num_tokens` tokens at positions [first_position, first_position + n).
  void add(int64_t first_position, int64_t num_tokens, bool prefill);
};

class StepCostModel {
 public:
  // seconds = intercept + per_prefill_token * prefill + per_decode_row * decode
  //           + per_attended_token * attended
  struct Coefficients {
    double intercept = 0;
    double per_prefill_token = 0;
    double per_decode_row = 0;
    double per_attended_token = 0;
  };

  // A conservative prior for a small model on a few CPU cores (slower than it is, so the first
  // chunks are small); measured steps replace it within a few dozen steps.
  static constexpr Coefficients kDefaultPrior{.intercept = 0.02,
                                              .per_prefill_token = 0.005,
                                              .per_decode_row = 0.01,
                                              .per_attended_token = 1e-6};

  explicit StepCostModel(Coefficients prior = kDefaultPrior);
  // A model that never learns: predictions stay `coefficients` (tests, fixed budgets).
  static StepCostModel fixed(Coefficients coefficients);

  double predict_seconds(const StepShape& shape) const;
  // Folds one measured step in: exponentially weighted least squares (older steps fade, so the
  // fit follows the machine's load), regularized towards the prior, so a direction the samples
  // never excited (no prefill seen yet) keeps the prior's cost.
  void observe(const StepShape& shape, double seconds);

  const Coefficients& coefficients() const { return coefficients_; }
  int64_t num_observed() const { return num_observed_; }

 private:
  static constexpr int kNumFeatures = 4;
  using Vector = std::array<double, kNumFeatures>;
  using Matrix = std::array<Vector, kNumFeatures>;

  static Vector features(const StepShape& shape);  // scaled to be ~1 for a typical step
  void solve();

  Vector prior_;  // in scaled units
  bool learns_ = true;
  Matrix weighted_xx_{};  // sum of decay^age * x x^T
  Vector weighted_xy_{};  // sum of decay^age * x * seconds
  Coefficients coefficients_;
  int64_t num_observed_ = 0;
};

}  // namespace lm
