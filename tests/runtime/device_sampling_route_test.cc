// Which rows the device samples and which keep the host's Sampler.
#include "runtime/device_sampling_route.h"

#include <gtest/gtest.h>

#include "runtime/random.h"
#include "runtime/sampler.h"

namespace lm {
namespace {

SamplingParams with(void (*set)(SamplingParams&)) {
  SamplingParams p;
  set(p);
  return p;
}

TEST(DeviceSamplingRoute, WarpersAndSeededDrawsStayOnTheDevice) {
  EXPECT_TRUE(samples_on_device({}, false, false));
  EXPECT_TRUE(samples_on_device({}, false, true));  // greedy rows are independent of each other
  const SamplingParams warped = with([](SamplingParams& p) {
    p.do_sample = true;
    p.temperature = 0.7f;
    p.top_k = 40;
    p.top_p = 0.9f;
    p.typical_p = 0.95f;
  });
  EXPECT_TRUE(samples_on_device(warped, false, false));
}

TEST(DeviceSamplingRoute, WhatTheDeviceKernelsLackGoesToTheHost) {
  EXPECT_FALSE(samples_on_device({}, /*constrained=*/true, false));
  EXPECT_FALSE(samples_on_device(with([](SamplingParams& p) { p.repetition_penalty = 1.2f; }),
                                 false, false));
  EXPECT_FALSE(
      samples_on_device(with([](SamplingParams& p) { p.frequency_penalty = 0.1f; }), false, false));
  EXPECT_FALSE(
      samples_on_device(with([](SamplingParams& p) { p.presence_penalty = 0.1f; }), false, false));
  EXPECT_FALSE(
      samples_on_device(with([](SamplingParams& p) { p.top_n_tokens = 3; }), false, false));
  EXPECT_FALSE(samples_on_device(with([](SamplingParams& p) {
                                   p.logit_bias = {{5, 1.0f}};
                                 }),
                                 false, false));
  EXPECT_FALSE(samples_on_device(with([](SamplingParams& p) { p.do_sample = true; }), false,
                                 /*has_proposals=*/true));
}

TEST(DeviceSamplingRoute, TheDeviceDrawTakesTheUniformTheSamplerWouldHaveTaken) {
  const int32_t prompt[] = {1, 2};
  Sampler sampler(with([](SamplingParams& p) {
                    p.do_sample = true;
                    p.seed = 42;
                  }),
                  prompt);
  Random same(42);
  EXPECT_EQ(sampler.next_uniform(), same.next_double());
  EXPECT_EQ(sampler.next_uniform(), same.next_double());
}

}  // namespace
}  // namespace lm
