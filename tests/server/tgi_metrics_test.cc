// TGI's metric set as recorded: the tgi_batch_* family from hand-built StepStats (names, method
// and reason labels, buckets, HELP texts, the mixed-step rule, failures), the skipped-tokens
// summary, and the engine gauges under TGI's and the Gateway API Inference Extension's names.
#include "server/state/tgi_metrics.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>

namespace lm {
namespace {

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

// Number of rendered lines starting with `prefix`.
int count_lines(const std::string& text, const std::string& prefix) {
  int n = 0;
  for (size_t at = 0; (at = text.find("\n" + prefix, at)) != std::string::npos; ++at) ++n;
  return n + (text.rfind(prefix, 0) == 0 ? 1 : 0);
}

// Every metric family name in `# TYPE` lines.
std::set<std::string> families(const std::string& text) {
  std::set<std::string> out;
  const std::regex type_line("# TYPE (\\S+) \\S+");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), type_line);
       it != std::sregex_iterator(); ++it)
    out.insert((*it)[1]);
  return out;
}

StepStats prefill_step() {  // two requests leave the queue together: a new batch, no concat
  StepStats s;
  s.num_sequences = 2;
  s.num_admitted = 2;
  s.num_prefill_tokens = 12;
  s.num_samples = 2;
  // Powers of two, so that sums are exact.
  s.execute_seconds = 0x1p-7;
  s.executor = {.prepare_seconds = 0x1p-12, .forward_seconds = 0x1p-8, .sample_seconds = 0x1p-11};
  s.update_seconds = 0x1p-13;
  s.deliver_seconds = 0x1p-12;
  return s;
}

StepStats mixed_step() {  // one newcomer's prompt beside two running decodes
  StepStats s = prefill_step();
  s.num_sequences = 3;
  s.num_admitted = 1;
  s.num_prefill_tokens = 5;
  s.num_decode_tokens = 2;
  s.num_samples = 3;
  return s;
}

StepStats chunk_step() {  // a long prompt's next chunk beside a decode, nobody admitted
  StepStats s = prefill_step();
  s.num_admitted = 0;
  s.num_prefill_tokens = 8;
  s.num_decode_tokens = 1;
  s.num_samples = 1;
  return s;
}

class TgiMetrics : public ::testing::Test {
 protected:
  TgiMetrics() { register_tgi_metrics(m, 100, 200); }
  Metrics m;
};

TEST_F(TgiMetrics, AStepThatAdmitsIsPrefillEvenMixedAnyOtherIsDecode) {
  EXPECT_STREQ(tgi_step_method(prefill_step()), "prefill");
  EXPECT_STREQ(tgi_step_method(mixed_step()), "prefill");
  EXPECT_STREQ(tgi_step_method(chunk_step()), "decode");
}

TEST_F(TgiMetrics, StepsRecordTheBatchFamilyPerMethod) {
  record_step(m, prefill_step());
  record_step(m, mixed_step());
  record_step(m, chunk_step());
  const std::string text = m.render();
  EXPECT_EQ(m.value("tgi_batch_inference_count", "method=\"prefill\""), 2);
  EXPECT_EQ(m.value("tgi_batch_inference_success", "method=\"prefill\""), 2);
  EXPECT_EQ(m.value("tgi_batch_inference_count", "method=\"decode\""), 1);
  EXPECT_EQ(m.value("tgi_batch_inference_success", "method=\"decode\""), 1);
  // Only the mixed step merged a new batch into a running one.
  EXPECT_EQ(m.value("tgi_batch_concat", "reason=\"chunking\""), 1);
  EXPECT_TRUE(has_line(text, "tgi_batch_concat_duration_count{method=\"decode\"} 1")) << text;
  EXPECT_EQ(text.find("tgi_batch_concat_duration_count{method=\"prefill\"}"), std::string::npos);
  EXPECT_EQ(text.find("tgi_batch_inference_failure"), std::string::npos);  // never recorded
  for (const char* h : {"tgi_batch_inference_duration", "tgi_batch_forward_duration",
                        "tgi_batch_decode_duration", "tgi_batch_filter_duration"}) {
    const std::string name = h;
    EXPECT_TRUE(has_line(text, name + "_count{method=\"prefill\"} 2")) << name;
    EXPECT_TRUE(has_line(text, name + "_count{method=\"decode\"} 1")) << name;
    // TGI's 35 duration bounds plus +Inf, per method.
    EXPECT_EQ(count_lines(text, name + "_bucket{method=\"prefill\",le="), 36) << name;
  }
  // forward 0.0039 s: above the 9th bound 0.0001 * 1.5^9, within the 10th.
  EXPECT_TRUE(has_line(
      text, "tgi_batch_forward_duration_bucket{method=\"decode\",le=\"0.0038443359374999994\"} 0"))
      << text;
  EXPECT_TRUE(has_line(
      text, "tgi_batch_forward_duration_bucket{method=\"decode\",le=\"0.00576650390625\"} 1"));
  EXPECT_TRUE(has_line(text, "tgi_batch_forward_duration_sum{method=\"decode\"} 0.00390625"));
  // The whole call: execute + update + deliver.
  EXPECT_TRUE(
      has_line(text, "tgi_batch_inference_duration_sum{method=\"decode\"} 0.0081787109375"));
  // Decode: sampling + finish rules. Filter: delivering tokens.
  EXPECT_TRUE(has_line(text, "tgi_batch_decode_duration_sum{method=\"decode\"} 0.0006103515625"));
  EXPECT_TRUE(has_line(text, "tgi_batch_filter_duration_sum{method=\"decode\"} 0.000244140625"));
  // Concatenation: building the inputs on the step that merged.
  EXPECT_TRUE(has_line(text, "tgi_batch_concat_duration_sum{method=\"decode\"} 0.000244140625"));
}

TEST_F(TgiMetrics, NextSizeCountsTheAdmittedOn1To1024) {
  record_step(m, prefill_step());
  record_step(m, chunk_step());  // no new batch: not recorded
  const std::string text = m.render();
  EXPECT_EQ(count_lines(text, "tgi_batch_next_size_bucket{le="), 1025);
  EXPECT_TRUE(has_line(text, "tgi_batch_next_size_bucket{le=\"1\"} 0"));
  EXPECT_TRUE(has_line(text, "tgi_batch_next_size_bucket{le=\"2\"} 1"));
  EXPECT_TRUE(has_line(text, "tgi_batch_next_size_bucket{le=\"1024\"} 1"));
  EXPECT_TRUE(has_line(text, "tgi_batch_next_size_count 1"));
  EXPECT_TRUE(has_line(text, "# HELP tgi_batch_next_size Batch size of the next batch"));
}

TEST_F(TgiMetrics, AFailedStepCountsAFailureAndNoDurations) {
  StepStats s = chunk_step();
  s.failed = true;
  record_step(m, s);
  const std::string text = m.render();
  EXPECT_EQ(m.value("tgi_batch_inference_count", "method=\"decode\""), 1);
  EXPECT_EQ(m.value("tgi_batch_inference_failure", "method=\"decode\""), 1);
  EXPECT_EQ(m.value("tgi_batch_inference_success", "method=\"decode\""), 0);
  EXPECT_EQ(text.find("tgi_batch_forward_duration"), std::string::npos) << text;
  EXPECT_EQ(text.find("tgi_request_skipped_tokens"), std::string::npos);
}

TEST_F(TgiMetrics, SkippedTokensIsASummaryOfZerosPerSampledSequence) {
  record_step(m, mixed_step());
  const std::string text = m.render();
  EXPECT_TRUE(has_line(text, "# HELP tgi_request_skipped_tokens Speculated tokens per request"));
  EXPECT_TRUE(has_line(text, "# TYPE tgi_request_skipped_tokens summary"));
  for (const char* q : {"0", "0.5", "0.9", "0.95", "0.99", "0.999", "1"})
    EXPECT_TRUE(has_line(text, std::string("tgi_request_skipped_tokens{quantile=\"") + q + "\"} 0"))
        << q;
  EXPECT_TRUE(has_line(text, "tgi_request_skipped_tokens_sum 0"));
  EXPECT_TRUE(has_line(text, "tgi_request_skipped_tokens_count 3"));
}

TEST_F(TgiMetrics, SkippedTokensCountEachSequencesAcceptedProposals) {
  StepStats s = chunk_step();  // three sampled sequences: one got 2 extra tokens, one 3
  s.num_samples = 3;
  s.num_proposed_tokens = 9;
  s.num_accepted = {0, 2, 3};
  record_step(m, s);
  const std::string text = m.render();
  EXPECT_TRUE(has_line(text, "tgi_request_skipped_tokens_sum 5"));
  EXPECT_TRUE(has_line(text, "tgi_request_skipped_tokens_count 3"));
  EXPECT_TRUE(has_line(text, "tgi_request_skipped_tokens{quantile=\"1\"} 3")) << text;
}

TEST_F(TgiMetrics, SpeculationCountersComeFromTheEngineStats) {
  EngineStats stats;
  publish_engine_stats(m, stats);
  EXPECT_EQ(m.render().find("lm_speculative_acceptance_rate"), std::string::npos);
  stats.num_proposed_tokens = 40;
  stats.num_accepted_tokens = 25;
  publish_engine_stats(m, stats);
  EXPECT_EQ(m.value("tgi_speculative_proposed_tokens"), 40);
  EXPECT_EQ(m.value("tgi_speculative_accepted_tokens"), 25);
  EXPECT_EQ(m.value("lm_speculative_acceptance_rate"), 25.0 / 40.0);
  EXPECT_TRUE(has_line(m.render(), "# TYPE tgi_speculative_accepted_tokens counter"));
}

// vLLM's families carry its model_name label (the served model id); TGI's and ours do not.
TEST_F(TgiMetrics, VllmFamiliesCarryTheModelName) {
  label_vllm_metrics(m, "HuggingFaceTB/SmolLM2-135M-Instruct");
  EngineStats stats;
  stats.num_running = 2;
  publish_engine_stats(m, stats);
  StepStats s = chunk_step();
  s.num_accepted = {1};
  s.num_proposed = {2};
  record_step(m, s);
  const std::string text = m.render();
  const std::string model = "model_name=\"HuggingFaceTB/SmolLM2-135M-Instruct\"";
  EXPECT_TRUE(has_line(text, "vllm:num_requests_running{" + model + "} 2")) << text;
  EXPECT_TRUE(has_line(
      text, "vllm:spec_decode_num_accepted_tokens_per_pos_total{" + model + ",position=\"0\"} 1"))
      << text;
  EXPECT_TRUE(has_line(text, "tgi_batch_current_size 2")) << text;
}

// vLLM's counters over two steps: a draft per sampling entry that proposed, its tokens, those
// accepted, and per position the drafts accepted that far; entries without proposals count
// nothing. Finished requests' totals go to the per-request histograms.
TEST_F(TgiMetrics, SpeculationStepsFeedVllmsCountersAndPerRequestHistograms) {
  StepStats s = chunk_step();
  s.num_samples = 3;
  s.num_proposed_tokens = 7;
  s.num_proposed = {0, 4, 3};
  s.num_accepted = {0, 2, 3};
  s.finished_speculation = {{.num_proposed = 11, .num_accepted = 9}};
  record_step(m, s);
  s.num_proposed = {2, 0, 0};
  s.num_accepted = {0, 0, 0};
  s.finished_speculation = {{.num_proposed = 2, .num_accepted = 0}};
  record_step(m, s);
  EXPECT_EQ(m.value("vllm:spec_decode_num_drafts_total"), 3);
  EXPECT_EQ(m.value("vllm:spec_decode_num_draft_tokens_total"), 9);
  EXPECT_EQ(m.value("vllm:spec_decode_num_accepted_tokens_total"), 5);
  EXPECT_EQ(m.value("vllm:spec_decode_num_accepted_tokens_per_pos_total", "position=\"0\""), 2);
  EXPECT_EQ(m.value("vllm:spec_decode_num_accepted_tokens_per_pos_total", "position=\"1\""), 2);
  EXPECT_EQ(m.value("vllm:spec_decode_num_accepted_tokens_per_pos_total", "position=\"2\""), 1);
  EXPECT_EQ(m.value("vllm:spec_decode_num_accepted_tokens_per_pos_total", "position=\"3\""), 0);
  const std::string text = m.render();
  EXPECT_TRUE(has_line(text, "# TYPE vllm:spec_decode_num_drafts_total counter"));
  EXPECT_TRUE(has_line(text, "# TYPE lm_request_speculative_accepted_tokens histogram"));
  EXPECT_TRUE(has_line(text, "lm_request_speculative_proposed_tokens_sum 13")) << text;
  EXPECT_TRUE(has_line(text, "lm_request_speculative_proposed_tokens_count 2"));
  EXPECT_TRUE(has_line(text, "lm_request_speculative_accepted_tokens_sum 9"));
  EXPECT_TRUE(has_line(text, "lm_request_speculative_accepted_tokens_count 2"));
}

TEST_F(TgiMetrics, HelpTextsAreTgis) {
  record_step(m, prefill_step());
  const std::string text = m.render();
  EXPECT_TRUE(has_line(
      text, "# HELP tgi_batch_inference_count Inference calls per method (prefill or decode)"));
  EXPECT_TRUE(has_line(text,
                       "# HELP tgi_batch_inference_success Number of successful inference calls "
                       "per method (prefill or decode)"));
  EXPECT_TRUE(has_line(text, "# HELP tgi_batch_inference_duration Batch inference duration"));
  EXPECT_TRUE(has_line(
      text,
      "# HELP tgi_batch_forward_duration Batch forward duration per method (prefill or decode)"));
  EXPECT_TRUE(has_line(text,
                       "# HELP tgi_batch_decode_duration Time spent decoding a batch per method "
                       "(prefill or decode)"));
  EXPECT_TRUE(has_line(text,
                       "# HELP tgi_batch_filter_duration Time spent filtering batches and sending "
                       "generated tokens per method (prefill or decode)"));
  EXPECT_TRUE(has_line(text, "# TYPE tgi_batch_inference_count counter"));
  EXPECT_TRUE(has_line(text, "# TYPE tgi_batch_forward_duration histogram"));
}

TEST_F(TgiMetrics, EngineStatsFeedTgisGaugesAndTheGatewayApis) {
  EngineStats stats;
  stats.num_waiting = 3;
  stats.num_running = 2;
  stats.num_reserved_tokens = 70;
  stats.num_blocks_used = 5;
  stats.num_blocks_total = 20;
  stats.num_blocks_resident = 7;
  publish_engine_stats(m, stats, 1024);
  EXPECT_EQ(m.value("tgi_kv_cache_blocks_resident"), 7);
  EXPECT_EQ(m.value("lm_kv_cache_resident_bytes"), 7 * 1024);
  EXPECT_EQ(m.value("tgi_queue_size"), 3);
  EXPECT_EQ(m.value("tgi_batch_current_size"), 2);
  EXPECT_EQ(m.value("tgi_batch_current_max_tokens"), 70);
  EXPECT_EQ(m.value("vllm:num_requests_waiting"), 3);
  EXPECT_EQ(m.value("vllm:num_requests_running"), 2);
  EXPECT_EQ(m.value("vllm:kv_cache_usage_perc"), 0.25);
  EXPECT_EQ(m.value("vllm:gpu_cache_usage_perc"), 0.25);
  const std::string text = m.render();
  EXPECT_TRUE(has_line(text, "# TYPE vllm:num_requests_waiting gauge"));
  EXPECT_TRUE(has_line(text, "vllm:kv_cache_usage_perc 0.25"));
}

TEST_F(TgiMetrics, StepDurationsAreSplitByWhatTheStepComputed) {
  StepStats prefill = prefill_step();
  prefill.step_seconds = 0x1p-6;
  StepStats mixed = mixed_step();
  mixed.step_seconds = 0x1p-5;
  StepStats decode = chunk_step();
  decode.num_prefill_tokens = 0;
  decode.step_seconds = 0x1p-8;
  EXPECT_STREQ(prefill.kind(), "prefill");
  EXPECT_STREQ(mixed.kind(), "mixed");
  EXPECT_STREQ(chunk_step().kind(), "mixed");
  EXPECT_STREQ(decode.kind(), "decode");
  record_step(m, prefill);
  record_step(m, mixed);
  record_step(m, mixed);
  record_step(m, decode);
  const std::string text = m.render();
  EXPECT_TRUE(has_line(text, "lm_step_duration_seconds_count{kind=\"prefill\"} 1")) << text;
  EXPECT_TRUE(has_line(text, "lm_step_duration_seconds_count{kind=\"mixed\"} 2"));
  EXPECT_TRUE(has_line(text, "lm_step_duration_seconds_sum{kind=\"mixed\"} 0.0625"));
  EXPECT_TRUE(has_line(text, "lm_step_duration_seconds_sum{kind=\"decode\"} 0.00390625"));
  EXPECT_EQ(count_lines(text, "lm_step_duration_seconds_bucket{kind=\"decode\",le="), 36);
}

TEST_F(TgiMetrics, InterTokenLatencyIsObservedFromTheSecondTokenOn) {
  InterTokenTimer timer;
  timer.on_token(m);
  EXPECT_EQ(m.render().find("lm_request_inter_token_latency_seconds"), std::string::npos);
  timer.on_token(m);
  timer.on_token(m);
  const std::string text = m.render();
  EXPECT_TRUE(has_line(text, "lm_request_inter_token_latency_seconds_count 2")) << text;
  EXPECT_EQ(count_lines(text, "lm_request_inter_token_latency_seconds_bucket{le="), 36);
}

TEST_F(TgiMetrics, EveryBatchFamilyNameIsServed) {
  record_step(m, prefill_step());
  record_step(m, mixed_step());
  StepStats failed = chunk_step();
  failed.failed = true;
  record_step(m, failed);
  publish_engine_stats(m, EngineStats{});
  const std::set<std::string> served = families(m.render());
  for (const char* name :
       {"tgi_queue_size", "tgi_batch_current_size", "tgi_batch_current_max_tokens",
        "tgi_batch_next_size", "tgi_batch_concat", "tgi_batch_inference_count",
        "tgi_batch_inference_success", "tgi_batch_inference_failure",
        "tgi_batch_inference_duration", "tgi_batch_forward_duration", "tgi_batch_decode_duration",
        "tgi_batch_filter_duration", "tgi_batch_concat_duration", "tgi_request_skipped_tokens"}) {
    EXPECT_TRUE(served.contains(name)) << name;
  }
}

}  // namespace
}  // namespace lm
