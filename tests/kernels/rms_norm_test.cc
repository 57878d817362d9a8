// RMSNorm against a hand-computed row and a double-precision reference for every ISA.
#include "kernels/cpu/rms_norm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "kernel_test_util.h"

namespace lm::kernels {
namespace {

TEST(RmsNorm, HandComputedRow) {
  const float x[2] = {3.0f, 4.0f};  // mean square 12.5
  const float w[2] = {1.0f, 2.0f};
  float y[2];
  rms_norm(x, w, y, 1, 2, 0.5f);  // rsqrt(13) = 0.27735...
  EXPECT_FLOAT_EQ(y[0], 3.0f / std::sqrt(13.0f));
  EXPECT_FLOAT_EQ(y[1], 8.0f / std::sqrt(13.0f));
}

TEST(RmsNorm, EveryIsaMatchesReferenceAndAllowsAliasing) {
  for (Isa isa : testing::supported_isas()) {
    for (int64_t n : {1, 7, 64, 576, 4101}) {
      SCOPED_TRACE(std::string(isa_name(isa)) + " n=" + std::to_string(n));
      const int64_t rows = 3;
      const auto x = testing::random_floats(rows * n, 5, -4.0f, 4.0f);
      const auto w = testing::random_floats(n, 6, 0.5f, 1.5f);
      std::vector<float> y(x.size());
      rms_norm(x.data(), w.data(), y.data(), rows, n, 1e-5f, isa);
      std::vector<float> in_place = x;
      rms_norm(in_place.data(), w.data(), in_place.data(), rows, n, 1e-5f, isa);
      for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x.data() + r * n;
        const double inv_rms = 1.0 / std::sqrt(testing::dot_double(xr, xr, n) / n + 1e-5);
        for (int64_t i = 0; i < n; ++i) {
          const double expected = xr[i] * inv_rms * w[i];
          EXPECT_NEAR(y[r * n + i], expected, 1e-5 * (1.0 + std::fabs(expected)));
          EXPECT_EQ(in_place[r * n + i], y[r * n + i]);
        }
      }
    }
  }
}

}  // namespace
}  // namespace lm::kernels
