// Response bodies, SSE events and headers, byte for byte against TGI's serde output.
#include "server/tgi/generate_response.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "server/tgi/info_response.h"
#include "server/wire/json_text.h"

namespace lm {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(JsonText, F32LikeRyu) {
  EXPECT_EQ(json_f32(1.0f), "1.0");
  EXPECT_EQ(json_f32(-0.34f), "-0.34");
  EXPECT_EQ(json_f32(-0.9f), "-0.9");
  EXPECT_EQ(json_f32(-1.2345678f), "-1.2345678");
  EXPECT_EQ(json_f32(0.0f), "0.0");
  EXPECT_EQ(json_f32(-0.0f), "-0.0");
  EXPECT_EQ(json_f32(1e-5f), "0.00001");
  EXPECT_EQ(json_f32(-1.234e-6f), "-0.000001234");
  EXPECT_EQ(json_f32(1e-7f), "1e-7");
  EXPECT_EQ(json_f32(-2.5e-12f), "-2.5e-12");
  EXPECT_EQ(json_f32(123456789.0f), "123456790.0");
  EXPECT_EQ(json_f32(1.5e16f), "1.5e16");
  EXPECT_EQ(json_f32(kNaN), "null");
  EXPECT_EQ(json_f32(kInf), "null");
  EXPECT_EQ(json_f32(-kInf), "null");
}

TEST(JsonText, RustDisplayAndDebug) {
  EXPECT_EQ(rust_f64_display(0.351829417), "0.351829417");
  EXPECT_EQ(rust_f64_display(2.0), "2");
  EXPECT_EQ(rust_f64_display(1e21), "1000000000000000000000");
  EXPECT_EQ(rust_f64_display(1e-7), "0.0000001");
  EXPECT_EQ(rust_f64_display(-0.0), "-0");
  EXPECT_EQ(rust_debug_str("a\"b\\\n\t\x01"), "\"a\\\"b\\\\\\n\\t\\u{1}\"");
  EXPECT_EQ(rust_debug_str("\xC3\xA9"), "\"\xC3\xA9\"");
}

TEST(JsonText, StringEscapes) {
  EXPECT_EQ(json_string("a\"\\/\b\f\n\r\t\x01\x7F\xC3\xA9"),
            "\"a\\\"\\\\/\\b\\f\\n\\r\\t\\u0001\x7F\xC3\xA9\"");
  EXPECT_EQ(json_string("bad\xFFutf8"), "\"bad\xEF\xBF\xBDutf8\"");
}

ResponseToken token(uint32_t id, std::string text, float logprob, bool special = false) {
  return ResponseToken{id, std::move(text), logprob, special};
}

TEST(GenerateResponse, WithoutDetails) {
  GenerateResponseBody body;
  body.result.generated_text = " Deep learning is";
  body.result.tokens = {token(1, "x", -1.0f)};
  EXPECT_EQ(generate_response_json(body), R"({"generated_text":" Deep learning is"})");
  EXPECT_EQ(compat_generate_response_json(body), R"([{"generated_text":" Deep learning is"}])");
}

TEST(GenerateResponse, DetailsInSerdeFieldOrder) {
  GenerateResponseBody body;
  body.include_details = true;
  body.result.generated_text = " Deep learning is";
  body.result.finish_reason = "length";
  body.result.generated_tokens = 3;
  body.result.tokens = {token(18682, " Deep", -0.9f), token(6975, " learning", -0.34f),
                        token(318, " is", kNaN)};
  body.result.top_tokens = {{token(18682, " Deep", -0.9f), token(4, "<s>", -kInf, true)},
                            {token(6975, " learning", -0.34f)},
                            {token(318, " is", -0.1f)}};
  EXPECT_EQ(
      generate_response_json(body),
      R"({"generated_text":" Deep learning is","details":{"finish_reason":"length","generated_tokens":3,)"
      R"("seed":null,"prefill":[],"tokens":[{"id":18682,"text":" Deep","logprob":-0.9,"special":false},)"
      R"({"id":6975,"text":" learning","logprob":-0.34,"special":false},)"
      R"({"id":318,"text":" is","logprob":null,"special":false}],)"
      R"("top_tokens":[[{"id":18682,"text":" Deep","logprob":-0.9,"special":false},)"
      R"({"id":4,"text":"<s>","logprob":null,"special":true}],)"
      R"([{"id":6975,"text":" learning","logprob":-0.34,"special":false}],)"
      R"([{"id":318,"text":" is","logprob":-0.1,"special":false}]]}})");
}

TEST(GenerateResponse, PrefillSeedAndBestOf) {
  GenerateResponseBody body;
  body.include_details = true;
  body.result.generated_text = "ab";
  body.result.finish_reason = "eos_token";
  body.result.generated_tokens = 1;
  body.result.seed = 42;
  body.result.prefill = {{1, "<s>", kNaN}, {22, "Hi", -3.5f}};
  body.result.tokens = {token(2, "</s>", -0.25f, true)};
  GeneratedSequence other;
  other.generated_text = "c";
  other.finish_reason = "stop_sequence";
  other.generated_tokens = 1;
  other.seed = 7;
  other.tokens = {token(3, "c", -2.0f)};
  body.best_of_sequences = std::vector<GeneratedSequence>{other};
  EXPECT_EQ(
      generate_response_json(body),
      R"({"generated_text":"ab","details":{"finish_reason":"eos_token","generated_tokens":1,)"
      R"("seed":42,"prefill":[{"id":1,"text":"<s>","logprob":null},{"id":22,"text":"Hi","logprob":-3.5}],)"
      R"("tokens":[{"id":2,"text":"</s>","logprob":-0.25,"special":true}],)"
      R"("best_of_sequences":[{"generated_text":"c","finish_reason":"stop_sequence",)"
      R"("generated_tokens":1,"seed":7,"prefill":[],"tokens":[{"id":3,"text":"c","logprob":-2.0,)"
      R"("special":false}]}]}})");
}

TEST(StreamEvents, IntermediateAndFinalAsInTgiExample) {
  StreamTokenEvent first;
  first.index = 1;
  first.token = token(11, ",", -1.2f);
  EXPECT_EQ(
      stream_event_sse(first),
      "data:{\"index\":1,\"token\":{\"id\":11,\"text\":\",\",\"logprob\":-1.2,\"special\":false},"
      "\"generated_text\":null,\"details\":null}\n\n");
  StreamTokenEvent last;
  last.index = 2;
  last.token = token(314, " I", -0.7f);
  last.generated_text = ", I";
  last.details = StreamDetailsBody{"length", 2, 1234567890123u, 1};
  EXPECT_EQ(
      stream_event_sse(last),
      "data:{\"index\":2,\"token\":{\"id\":314,\"text\":\" I\",\"logprob\":-0.7,\"special\":false},"
      "\"generated_text\":\", I\",\"details\":{\"finish_reason\":\"length\",\"generated_tokens\":2,"
      "\"seed\":1234567890123,\"input_length\":1}}\n\n");
}

TEST(StreamEvents, TopTokensAndGreedySeed) {
  StreamTokenEvent event;
  event.index = 3;
  event.token = token(5, "\n", kNaN);
  event.top_tokens = {token(5, "\n", -0.5f)};
  event.generated_text = "";
  event.details = StreamDetailsBody{"eos_token", 3, std::nullopt, 7};
  EXPECT_EQ(
      stream_event_sse(event),
      "data:{\"index\":3,\"token\":{\"id\":5,\"text\":\"\\n\",\"logprob\":null,\"special\":false},"
      "\"top_tokens\":[{\"id\":5,\"text\":\"\\n\",\"logprob\":-0.5,\"special\":false}],"
      "\"generated_text\":\"\",\"details\":{\"finish_reason\":\"eos_token\",\"generated_tokens\":3,"
      "\"seed\":null,\"input_length\":7}}\n\n");
}

TEST(StreamEvents, Errors) {
  EXPECT_EQ(stream_error_sse(incomplete_generation_stream_error()),
            "data:{\"error\":\"Incomplete generation "
            "stream\",\"error_type\":\"incomplete_generation_stream\"}\n\n");
  EXPECT_EQ(
      stream_error_sse(validation_error("`best_of` != 1 is not supported when streaming tokens")),
      "data:{\"error\":\"Input validation error: `best_of` != 1 is not supported when streaming "
      "tokens\",\"error_type\":\"validation\"}\n\n");
  EXPECT_EQ(kSseKeepAlive, ":\n\n");
}

TEST(Headers, NonStream) {
  using std::chrono::milliseconds;
  using std::chrono::nanoseconds;
  GenerateTimings t;
  t.total = nanoseconds(351829417);
  t.validation = nanoseconds(1999999);
  t.queue = milliseconds(3);
  t.inference = milliseconds(340);
  const HeaderList headers = generate_response_headers("gpu+optimized", 22, t, 7, 3);
  const HeaderList expected = {
      {"content-type", "application/json"},
      {"x-compute-type", "gpu+optimized"},
      {"x-compute-time", "0.351829417"},
      {"x-compute-characters", "22"},
      {"x-total-time", "351"},
      {"x-validation-time", "1"},
      {"x-queue-time", "3"},
      {"x-inference-time", "340"},
      {"x-time-per-token", "113"},
      {"x-prompt-tokens", "7"},
      {"x-generated-tokens", "3"},
  };
  EXPECT_EQ(headers, expected);
  t.total = std::chrono::seconds(2);
  EXPECT_EQ(generate_response_headers("x", 0, t, 0, 0)[2].second, "2");
}

TEST(Headers, Stream) {
  const HeaderList expected = {{"content-type", "text/event-stream"},
                               {"cache-control", "no-cache"},
                               {"x-compute-type", "1-nvidia-a10g"},
                               {"x-compute-characters", "5"},
                               {"x-accel-buffering", "no"}};
  EXPECT_EQ(stream_response_headers("1-nvidia-a10g", 5), expected);
  EXPECT_EQ(count_characters("h\xC3\xA9llo\xF0\x9F\x98\x80"), 6u);
}

// /info is built from the server's settings (TGI's launcher defaults unless set).
TEST(InfoResponses, InfoInTgiKeyOrder) {
  ServerSettings settings;
  settings.model_id = "bigscience/bloom-560m";
  settings.model_sha = "ac2ae5fab2ce3f9f40dc79b5ca9f637430d24971";
  settings.model_pipeline_tag = "text-generation";
  settings.limits.max_input_tokens = 2047;
  settings.limits.max_total_tokens = 2048;
  EXPECT_EQ(
      info_json(info_body_of(settings)),
      R"({"model_id":"bigscience/bloom-560m","model_sha":"ac2ae5fab2ce3f9f40dc79b5ca9f637430d24971",)"
      R"("model_pipeline_tag":"text-generation","max_concurrent_requests":128,"max_best_of":2,)"
      R"("max_stop_sequences":4,"max_input_tokens":2047,"max_total_tokens":2048,)"
      R"("validation_workers":2,"max_client_batch_size":4,"router":"text-generation-router",)"
      R"("version":"3.3.6-dev0","sha":null,"docker_label":null})");
}

TEST(InfoResponses, TokenizeAndModels) {
  EXPECT_EQ(
      tokenize_response_json({{1, "", 0, 0}, {22172, "Hi", 0, 2}}),
      R"([{"id":1,"text":"","start":0,"stop":0},{"id":22172,"text":"Hi","start":0,"stop":2}])");
  EXPECT_EQ(tokenize_response_json({}), "[]");
  EXPECT_EQ(
      models_response_json("org/model"),
      R"({"object":"list","data":[{"id":"org/model","object":"model","created":0,"owned_by":"org/model"}]})");
}

}  // namespace
}  // namespace lm
