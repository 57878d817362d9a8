#include "engine/step_cost_model.h"

#include <algorithm>
#include <cmath>

namespace lm {
namespace {

// Feature scales: a feature divided by its scale is about 1 in a typical CPU step, so that the
// normal equations stay well conditioned and one ridge weight suits every direction.
constexpr double kPrefillScale = 256;      // tokens
constexpr double kDecodeScale = 8;         // rows
constexpr double kAttendedScale = 262144;  // attended key positions (2^18)
// Each new step weighs this much less on the older ones (~50 steps of memory).
constexpr double kDecay = 0.98;
// The prior's weight, as if it were this fraction of one step seen in every direction.
constexpr double kRidge = 1e-3;

}  // namespace

void StepShape::add(int64_t first_position, int64_t num_tokens, bool prefill) {
  (prefill ? num_prefill_tokens : num_decode_rows) += num_tokens;
  // Token at position p attends to positions [0, p]: sum over p of (p + 1), each term capped at
  // the window: positions p < window - 1 count p + 1, the others window.
  const int64_t end = first_position + num_tokens;
  const int64_t uncapped_end = window > 0 ? std::clamp(window - 1, first_position, end) : end;
  const int64_t n = uncapped_end - first_position;
  num_attended_tokens += n * first_position + n * (n + 1) / 2 + (end - uncapped_end) * window;
}

StepCostModel::StepCostModel(Coefficients prior) : coefficients_(prior) {
  prior_ = {prior.intercept, prior.per_prefill_token * kPrefillScale,
            prior.per_decode_row * kDecodeScale, prior.per_attended_token * kAttendedScale};
}

StepCostModel StepCostModel::fixed(Coefficients coefficients) {
  StepCostModel model(coefficients);
  model.learns_ = false;
  return model;
}

StepCostModel::Vector StepCostModel::features(const StepShape& shape) {
  return {1.0, static_cast<double>(shape.num_prefill_tokens) / kPrefillScale,
          static_cast<double>(shape.num_decode_rows) / kDecodeScale,
          static_cast<double>(shape.num_attended_tokens) / kAttendedScale};
}

double StepCostModel::predict_seconds(const StepShape& shape) const {
  return coefficients_.intercept +
         coefficients_.per_prefill_token * static_cast<double>(shape.num_prefill_tokens) +
         coefficients_.per_decode_row * static_cast<double>(shape.num_decode_rows) +
         coefficients_.per_attended_token * static_cast<double>(shape.num_attended_tokens);
}

void StepCostModel::observe(const StepShape& shape, double seconds) {
  if (!learns_ || !std::isfinite(seconds) || seconds < 0) return;
  const Vector x = features(shape);
  for (int i = 0; i < kNumFeatures; ++i) {
    for (int j = 0; j < kNumFeatures; ++j)
      weighted_xx_[i][j] = kDecay * weighted_xx_[i][j] + x[i] * x[j];
    weighted_xy_[i] = kDecay * weighted_xy_[i] + x[i] * seconds;
  }
  ++num_observed_;
  solve();
}

void StepCostModel::solve() {
  // (sum x x^T + ridge I) theta = sum x y + ridge prior, by Gaussian elimination with partial
  // pivoting (the ridge keeps the matrix positive definite).
  Matrix a = weighted_xx_;
  Vector b = weighted_xy_;
  for (int i = 0; i < kNumFeatures; ++i) {
    a[i][i] += kRidge;
    b[i] += kRidge * prior_[i];
  }
  for (int col = 0; col < kNumFeatures; ++col) {
    int pivot = col;
    for (int row = col + 1; row < kNumFeatures; ++row)
      if (std::abs(a[row][col]) > std::abs(a[pivot][col])) pivot = row;
    std::swap(a[col], a[pivot]);
    std::swap(b[col], b[pivot]);
    for (int row = col + 1; row < kNumFeatures; ++row) {
      const double f = a[row][col] / a[col][col];
      for (int k = col; k < kNumFeatures; ++k) a[row][k] -= f * a[col][k];
      b[row] -= f * b[col];
    }
  }
  Vector theta{};
  for (int row = kNumFeatures - 1; row >= 0; --row) {
    double sum = b[row];
    for (int k = row + 1; k < kNumFeatures; ++k) sum -= a[row][k] * theta[k];
    theta[row] = sum / a[row][row];
  }
  // NOTE: a cost is never negative; a noisy fit that says so would let a step take unbounded
  // prompt tokens, so each coefficient is clamped at 0.
  for (double& t : theta) t = std::max(t, 0.0);
  coefficients_ = {theta[0], theta[1] / kPrefillScale, theta[2] / kDecodeScale,
                   theta[3] / kAttendedScale};
}

}  // namespace lm
