#include "server/metrics/metrics.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace lm {
namespace {

TEST(Metrics, SeriesAppearOnlyAfterFirstRecording) {
  Metrics m;
  m.describe("tgi_request_count", "Total number of requests");
  EXPECT_EQ(m.render(), "");
  m.increment("tgi_request_count");
  m.increment("tgi_request_count");
  m.increment("tgi_request_failure", "err=\"validation\"");
  const std::string text = m.render();
  EXPECT_NE(
      text.find(
          "# HELP tgi_request_count Total number of requests\n# TYPE tgi_request_count counter\n"
          "tgi_request_count 2\n"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("tgi_request_failure{err=\"validation\"} 1\n"), std::string::npos);
  EXPECT_EQ(m.value("tgi_request_count"), 2);
  EXPECT_EQ(m.value("tgi_request_failure", "err=\"dropped\""), 0);
}

TEST(Metrics, HistogramBucketsAreCumulative) {
  Metrics m;
  m.set_buckets("tgi_request_input_length", Metrics::linear_buckets(10, 10));
  m.observe("tgi_request_input_length", 1);
  m.observe("tgi_request_input_length", 2.5);
  m.observe("tgi_request_input_length", 50);
  const std::string text = m.render();
  EXPECT_NE(text.find("tgi_request_input_length_bucket{le=\"1\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("tgi_request_input_length_bucket{le=\"3\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("tgi_request_input_length_bucket{le=\"10\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("tgi_request_input_length_bucket{le=\"+Inf\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("tgi_request_input_length_sum 53.5\n"), std::string::npos);
  EXPECT_NE(text.find("tgi_request_input_length_count 3\n"), std::string::npos);
}

TEST(Metrics, DurationBucketsMatchTgi) {
  const auto b = Metrics::duration_buckets();
  ASSERT_EQ(b.size(), 35u);
  EXPECT_NEAR(b.front(), 0.00015, 1e-12);
  EXPECT_NEAR(b.back(), 145.611, 1e-3);
  // TGI multiplies step by step; 0.0001 * 1.5^k would differ in the last bit of most bounds
  // (this one: 0.0038443359375000003), and so would the rendered `le` label.
  EXPECT_EQ(fmt::format("{}", b[8]), "0.0038443359374999994");
  EXPECT_EQ(fmt::format("{}", b.back()), "145.61096060497135");
}

TEST(Metrics, SummariesRenderNearestRankQuantiles) {
  Metrics m;
  m.set_summary("tgi_request_skipped_tokens");
  EXPECT_EQ(m.render(), "");  // declared, not yet observed
  for (int v : {3, 1, 2, 10, 4, 5, 6, 7, 8, 9}) m.observe("tgi_request_skipped_tokens", v);
  EXPECT_EQ(m.render(),
            "# TYPE tgi_request_skipped_tokens summary\n"
            "tgi_request_skipped_tokens{quantile=\"0\"} 1\n"
            "tgi_request_skipped_tokens{quantile=\"0.5\"} 5\n"
            "tgi_request_skipped_tokens{quantile=\"0.9\"} 9\n"
            "tgi_request_skipped_tokens{quantile=\"0.95\"} 10\n"
            "tgi_request_skipped_tokens{quantile=\"0.99\"} 10\n"
            "tgi_request_skipped_tokens{quantile=\"0.999\"} 10\n"
            "tgi_request_skipped_tokens{quantile=\"1\"} 10\n"
            "tgi_request_skipped_tokens_sum 55\n"
            "tgi_request_skipped_tokens_count 10\n\n");
}

TEST(Metrics, GaugesSetAndAdd) {
  Metrics m;
  m.set_gauge("tgi_queue_size", 3);
  m.add_gauge("tgi_queue_size", -1);
  EXPECT_EQ(m.value("tgi_queue_size"), 2);
  EXPECT_NE(m.render().find("# TYPE tgi_queue_size gauge\ntgi_queue_size 2\n"), std::string::npos);
}

TEST(Metrics, PrefixLabelsComeFirstOnTheirFamiliesOnly) {
  Metrics m;
  m.set_prefix_labels("vllm:", Metrics::label_pair("model_name", "replaced"));
  m.set_prefix_labels("vllm:", Metrics::label_pair("model_name", "org/m\"1\\\n"));
  m.set_gauge("vllm:num_requests_running", 2);
  m.increment("vllm:spec_decode_num_accepted_tokens_per_pos_total", "position=\"0\"", 3);
  m.set_buckets("vllm:e2e_request_latency_seconds", {1.0});
  m.observe("vllm:e2e_request_latency_seconds", 0.5);
  m.set_summary("vllm:request_params_n");
  m.observe("vllm:request_params_n", 2);
  m.set_gauge("tgi_queue_size", 1);
  const std::string text = m.render();
  const std::string model = "model_name=\"org/m\\\"1\\\\\\n\"";
  EXPECT_NE(text.find("vllm:num_requests_running{" + model + "} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("vllm:spec_decode_num_accepted_tokens_per_pos_total{" + model +
                      ",position=\"0\"} 3\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("vllm:e2e_request_latency_seconds_bucket{" + model + ",le=\"1\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("vllm:request_params_n{" + model + ",quantile=\"0.5\"} 2\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("replaced"), std::string::npos) << text;
  EXPECT_NE(text.find("\ntgi_queue_size 1\n"), std::string::npos) << text;
  // Lookups keep the series' own labels.
  EXPECT_EQ(m.value("vllm:num_requests_running"), 2);
  EXPECT_EQ(m.value("vllm:spec_decode_num_accepted_tokens_per_pos_total", "position=\"0\""), 3);
}

}  // namespace
}  // namespace lm
