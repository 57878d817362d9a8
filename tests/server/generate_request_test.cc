// Parsing (axum/serde rejections, byte for byte) and validation (TGI's exact messages and
// order) of /generate-shaped bodies.
#include "server/tgi/generate_request.h"

#include <gtest/gtest.h>

#include <cmath>

#include "server/admission/validation.h"

namespace lm {
namespace {

ParsedGenerateRequest parse_ok(std::string_view body,
                               GenerateBody shape = GenerateBody::kGenerate) {
  auto result = parse_generate_request(body, shape);
  if (auto* rejection = std::get_if<BodyRejection>(&result)) {
    ADD_FAILURE() << body << " -> " << rejection->status << " " << rejection->body;
    return {};
  }
  return std::get<ParsedGenerateRequest>(std::move(result));
}

BodyRejection parse_error(std::string_view body, GenerateBody shape = GenerateBody::kGenerate) {
  auto result = parse_generate_request(body, shape);
  if (!std::holds_alternative<BodyRejection>(result)) {
    ADD_FAILURE() << body << " parsed";
    return {};
  }
  return std::get<BodyRejection>(result);
}

// The serde message of a 400 (syntax) rejection.
std::string syntax(std::string_view body) {
  const BodyRejection r = parse_error(body);
  EXPECT_EQ(r.status, 400) << r.body;
  const std::string prefix = "Failed to parse the request body as JSON: ";
  EXPECT_EQ(r.body.substr(0, prefix.size()), prefix);
  return r.body.substr(std::min(prefix.size(), r.body.size()));
}

// The serde message of a 422 (data) rejection.
std::string shape_error(std::string_view body, GenerateBody shape = GenerateBody::kGenerate) {
  const BodyRejection r = parse_error(body, shape);
  EXPECT_EQ(r.status, 422) << r.body;
  const std::string prefix = "Failed to deserialize the JSON body into the target type: ";
  EXPECT_EQ(r.body.substr(0, prefix.size()), prefix);
  return r.body.substr(std::min(prefix.size(), r.body.size()));
}

TEST(ParseGenerateRequest, FullBody) {
  const auto r = parse_ok(R"({"inputs":"What is Deep Learning?","parameters":{"best_of":2,
    "temperature":0.5,"repetition_penalty":1.03,"frequency_penalty":0.1,"top_k":10,"top_p":0.95,
    "typical_p":0.9,"do_sample":true,"max_new_tokens":20,"return_full_text":false,
    "stop":["photographer","\n"],"truncate":8,"watermark":true,"details":true,
    "decoder_input_details":true,"seed":18446744073709551615,"top_n_tokens":5,
    "grammar":{"type":"regex","value":"a+"},"adapter_id":"lora"}})");
  const GenerateParameters& p = r.parameters;
  EXPECT_EQ(r.inputs, "What is Deep Learning?");
  EXPECT_EQ(p.best_of, 2u);
  EXPECT_FLOAT_EQ(*p.temperature, 0.5f);
  EXPECT_FLOAT_EQ(*p.repetition_penalty, 1.03f);
  EXPECT_FLOAT_EQ(*p.frequency_penalty, 0.1f);
  EXPECT_EQ(p.top_k, 10);
  EXPECT_FLOAT_EQ(*p.top_p, 0.95f);
  EXPECT_FLOAT_EQ(*p.typical_p, 0.9f);
  EXPECT_TRUE(p.do_sample);
  EXPECT_EQ(p.max_new_tokens, 20u);
  EXPECT_EQ(p.return_full_text, false);
  EXPECT_EQ(p.stop, (std::vector<std::string>{"photographer", "\n"}));
  EXPECT_EQ(p.truncate, 8u);
  EXPECT_TRUE(p.watermark);
  EXPECT_TRUE(p.details);
  EXPECT_TRUE(p.decoder_input_details);
  EXPECT_EQ(p.seed, 18446744073709551615ull);
  EXPECT_EQ(p.top_n_tokens, 5u);
  ASSERT_TRUE(p.grammar);
  EXPECT_EQ(p.grammar->type, "regex");
  EXPECT_EQ(p.grammar->value_json, "\"a+\"");
  EXPECT_EQ(p.adapter_id, "lora");
}

TEST(ParseGenerateRequest, AbsentParametersMeansSampling) {
  EXPECT_TRUE(parse_ok(R"({"inputs":"a"})").parameters.do_sample);
  EXPECT_FALSE(parse_ok(R"({"inputs":"a","parameters":{}})").parameters.do_sample);
  const auto p = parse_ok(R"({"inputs":"a","parameters":{}})").parameters;
  EXPECT_FALSE(p.max_new_tokens);  // automatic
  EXPECT_FALSE(p.details);
  EXPECT_TRUE(p.stop.empty());
}

TEST(ParseGenerateRequest, OptionalFieldsAcceptNull) {
  const auto p = parse_ok(R"({"inputs":"a","parameters":{"best_of":null,"temperature":null,
    "repetition_penalty":null,"frequency_penalty":null,"top_k":null,"top_p":null,"typical_p":null,
    "max_new_tokens":null,"return_full_text":null,"truncate":null,"seed":null,"top_n_tokens":null,
    "grammar":null,"adapter_id":null}})")
                     .parameters;
  EXPECT_FALSE(p.best_of || p.temperature || p.top_k || p.max_new_tokens || p.seed || p.grammar);
}

TEST(ParseGenerateRequest, UnknownFieldsAndTrailingBytesIgnored) {
  const auto r = parse_ok(
      R"({"x":{"deep":[1,2.5e400,"s",null,true]},"inputs":"a","parameters":{"foo":1,"stream":null},
      "add_special_tokens":false} trailing garbage)");
  EXPECT_EQ(r.inputs, "a");
}

TEST(ParseGenerateRequest, StreamOnlyOnCompatShape) {
  EXPECT_TRUE(parse_ok(R"({"inputs":"a","stream":true})", GenerateBody::kCompat).stream);
  EXPECT_FALSE(parse_ok(R"({"inputs":"a","stream":true})").stream);
  EXPECT_FALSE(parse_ok(R"({"inputs":"a","stream":null})").stream);  // unknown on /generate
  EXPECT_EQ(shape_error(R"({"inputs":"a","stream":null})", GenerateBody::kCompat),
            "stream: invalid type: null, expected a boolean at line 1 column 27");
}

TEST(ParseGenerateRequest, StringEscapes) {
  EXPECT_EQ(parse_ok(R"({"inputs":"\u00e9\ud83d\ude00\n\"\/"})").inputs,
            "\xC3\xA9\xF0\x9F\x98\x80\n\"/");
  EXPECT_EQ(parse_ok(R"({"inp\u0075ts":"a"})").inputs, "a");
}

TEST(ParseGenerateRequest, ArrayFormOfStruct) {
  // serde derive accepts a struct as the list of its fields.
  const auto r = parse_ok(R"(["hello",{"max_new_tokens":3}])");
  EXPECT_EQ(r.inputs, "hello");
  EXPECT_EQ(r.parameters.max_new_tokens, 3u);
  EXPECT_TRUE(parse_ok(R"(["hello"])").parameters.do_sample);
  EXPECT_EQ(shape_error("[]"),
            "invalid length 0, expected struct GenerateRequest with 2 elements at line 1 column 2");
  EXPECT_EQ(syntax(R"(["a",{},3])"), "trailing characters at line 1 column 9");
}

TEST(ParseGenerateRequest, SyntaxErrorsAre400) {
  EXPECT_EQ(syntax(""), "EOF while parsing a value at line 1 column 0");
  EXPECT_EQ(syntax("x"), "expected value at line 1 column 1");
  EXPECT_EQ(syntax("{"), "EOF while parsing an object at line 1 column 1");
  EXPECT_EQ(syntax(R"({"inputs":"a",})"), "trailing comma at line 1 column 15");
  EXPECT_EQ(syntax(R"({"inputs":"a" "b":1})"), "expected `,` or `}` at line 1 column 15");
  EXPECT_EQ(syntax(R"({1:2})"), "key must be a string at line 1 column 2");
  EXPECT_EQ(syntax(R"({"inputs" "a"})"), "expected `:` at line 1 column 11");
  EXPECT_EQ(syntax(R"({"inputs":"a)"), "inputs: EOF while parsing a string at line 1 column 12");
  EXPECT_EQ(syntax("{\"inputs\":\"a\nb\"}"),
            "inputs: control character (\\u0000-\\u001F) found while parsing a string at line 1 "
            "column 12");
  EXPECT_EQ(syntax(R"({"inputs":"\q"})"), "inputs: invalid escape at line 1 column 13");
  EXPECT_EQ(syntax(R"({"inputs":"\ud800"})"),
            "inputs: unexpected end of hex escape at line 1 column 18");
  EXPECT_EQ(syntax("{\"inputs\":\"\xFF\"}"),
            "inputs: invalid unicode code point at line 1 column 13");
  EXPECT_EQ(syntax(R"({"inputs":"a","parameters":{"top_k":}})"),
            "parameters.top_k: expected value at line 1 column 37");
  EXPECT_EQ(syntax(R"({"inputs":"a","parameters":{"temperature":1e400}})"),
            "parameters.temperature: number out of range at line 1 column 47");
  EXPECT_EQ(syntax(R"({"inputs":"a","parameters":{"top_k":01}})"),
            "parameters.top_k: invalid number at line 1 column 38");
  EXPECT_EQ(syntax(R"({"inputs":"a","parameters":{"top_k":1.}})"),
            "parameters.top_k: invalid number at line 1 column 39");
  EXPECT_EQ(syntax(R"({"inputs":"a","parameters":{"do_sample":tru}})"),
            "parameters.do_sample: expected ident at line 1 column 44");
  EXPECT_EQ(syntax(R"({"inputs":"a","parameters":{"top_k":1 "x"}})"),
            "parameters.?: expected `,` or `}` at line 1 column 39");
  EXPECT_EQ(syntax("{\"inputs\":\"a\",\n\"x\":[1,]}"), "x: trailing comma at line 2 column 8");
  EXPECT_EQ(syntax("{\"x\":" + std::string(200, '[')),
            "x: recursion limit exceeded at line 1 column 132");
  EXPECT_EQ(shape_error(std::string(200, '[')),
            "[0]: invalid type: sequence, expected a string at line 1 column 1");
}

TEST(ParseGenerateRequest, ShapeErrorsAre422) {
  EXPECT_EQ(shape_error("{}"), "missing field `inputs` at line 1 column 2");
  EXPECT_EQ(shape_error(R"({"parameters":{}} )"), "missing field `inputs` at line 1 column 17");
  EXPECT_EQ(shape_error("null"),
            "invalid type: null, expected struct GenerateRequest at line 1 column 4");
  EXPECT_EQ(shape_error(R"("hi")"),
            R"(invalid type: string "hi", expected struct GenerateRequest at line 1 column 4)");
  EXPECT_EQ(
      shape_error("[]", GenerateBody::kCompat),
      "invalid length 0, expected struct CompatGenerateRequest with 3 elements at line 1 column 2");
  EXPECT_EQ(shape_error(R"({"inputs": 1})"),
            "inputs: invalid type: integer `1`, expected a string at line 1 column 12");
  EXPECT_EQ(shape_error(R"({"inputs": {}})"),
            "inputs: invalid type: map, expected a string at line 1 column 11");
  EXPECT_EQ(shape_error(R"({"inputs":"a","inputs":"b"})"),
            "duplicate field `inputs` at line 1 column 22");
  EXPECT_EQ(
      shape_error(R"({"inputs":"a","parameters":null})"),
      "parameters: invalid type: null, expected struct GenerateParameters at line 1 column 31");
  EXPECT_EQ(shape_error(R"({"inputs":"a","parameters":{"stop":null}})"),
            "parameters.stop: invalid type: null, expected a sequence at line 1 column 39");
  EXPECT_EQ(shape_error(R"({"inputs":"a","parameters":{"stop":[1]}})"),
            "parameters.stop[0]: invalid type: integer `1`, expected a string at line 1 column 37");
  EXPECT_EQ(shape_error(R"({"inputs":"a","parameters":{"do_sample":null}})"),
            "parameters.do_sample: invalid type: null, expected a boolean at line 1 column 44");
  EXPECT_EQ(shape_error(R"({"inputs":"a","parameters":{"details":null}})"),
            "parameters.details: invalid type: null, expected a boolean at line 1 column 42");
  EXPECT_EQ(
      shape_error(R"({"inputs":"a","parameters":{"watermark":1}})"),
      "parameters.watermark: invalid type: integer `1`, expected a boolean at line 1 column 41");
  EXPECT_EQ(
      shape_error(R"({"inputs":"a","parameters":{"max_new_tokens":20.0}})"),
      "parameters.max_new_tokens: invalid type: floating point `20.0`, expected u32 at line 1 "
      "column 49");
  EXPECT_EQ(
      shape_error(R"({"inputs":"a","parameters":{"max_new_tokens":-1}})"),
      "parameters.max_new_tokens: invalid value: integer `-1`, expected u32 at line 1 column 47");
  EXPECT_EQ(
      shape_error(R"({"inputs":"a","parameters":{"max_new_tokens":4294967296}})"),
      "parameters.max_new_tokens: invalid value: integer `4294967296`, expected u32 at line 1 "
      "column 55");
  EXPECT_EQ(
      shape_error(R"({"inputs":"a","parameters":{"max_new_tokens":-0}})"),
      "parameters.max_new_tokens: invalid type: floating point `-0.0`, expected u32 at line 1 "
      "column 47");
  EXPECT_EQ(shape_error(R"({"inputs":"a","parameters":{"top_k":"x"}})"),
            R"(parameters.top_k: invalid type: string "x", expected i32 at line 1 column 39)");
  EXPECT_EQ(
      shape_error(R"({"inputs":"a","parameters":{"top_k":1e3}})"),
      "parameters.top_k: invalid type: floating point `1000.0`, expected i32 at line 1 column 39");
  EXPECT_EQ(shape_error(R"({"inputs":"a","parameters":{"best_of":-2}})"),
            "parameters.best_of: invalid value: integer `-2`, expected usize at line 1 column 40");
  EXPECT_EQ(shape_error(R"({"inputs":"a","parameters":{"seed":-2}})"),
            "parameters.seed: invalid value: integer `-2`, expected u64 at line 1 column 37");
  EXPECT_EQ(
      shape_error(R"({"inputs":"a","parameters":{"temperature":"hot"}})"),
      R"(parameters.temperature: invalid type: string "hot", expected f32 at line 1 column 47)");
  EXPECT_EQ(shape_error(R"({"inputs":"a","parameters":{"temperature":[]}})"),
            "parameters.temperature: invalid type: sequence, expected f32 at line 1 column 42");
  EXPECT_EQ(
      shape_error(R"({"inputs":"a","parameters":{"grammar":{"type":"xml","value":1}}})"),
      "parameters.grammar.type: unknown variant `xml`, expected one of `json`, `json_object`, "
      "`regex`, `json_schema` at line 1 column 51");
  EXPECT_EQ(shape_error(R"({"inputs":"a","parameters":{"grammar":{"type":"json"}}})"),
            "parameters.grammar: missing field `value` at line 1 column 53");
}

// ---- validation ----

ValidationLimits limits() {
  ValidationLimits l;
  l.max_best_of = 2;
  l.max_stop_sequences = 4;
  l.max_top_n_tokens = 5;
  l.max_input_tokens = 1023;
  l.max_total_tokens = 2048;
  return l;
}

// The validation message of a body, or "" when it passes parameter validation.
std::string invalid(std::string_view body, bool streaming = false) {
  ParsedGenerateRequest request = parse_ok(body);
  if (auto error = validate_before_permit(request.parameters, limits(), streaming)) {
    EXPECT_EQ(error->status, 422);
    EXPECT_EQ(error->error_type, "validation");
    return error->error;
  }
  auto result = validate_parameters(std::move(request), limits(), streaming);
  if (auto* error = std::get_if<ApiError>(&result)) {
    EXPECT_EQ(error->status, 422);
    EXPECT_EQ(error->error_type, "validation");
    return error->error;
  }
  return "";
}

std::string params(std::string_view json) {
  return R"({"inputs":"a","parameters":)" + std::string(json) + "}";
}

TEST(ValidateParameters, EachRuleHasTgisMessage) {
  EXPECT_EQ(invalid(params(R"({"temperature":0})")),
            "Input validation error: `temperature` must be strictly positive");
  EXPECT_EQ(invalid(params(R"({"temperature":-1})")),
            "Input validation error: `temperature` must be strictly positive");
  EXPECT_EQ(invalid(params(R"({"repetition_penalty":0})")),
            "Input validation error: `repetition_penalty` must be strictly positive");
  EXPECT_EQ(invalid(params(R"({"frequency_penalty":2.5})")),
            "Input validation error: `frequency_penalty` must be >= -2.0 and <= 2.0");
  EXPECT_EQ(invalid(params(R"({"frequency_penalty":-2.01})")),
            "Input validation error: `frequency_penalty` must be >= -2.0 and <= 2.0");
  EXPECT_EQ(invalid(params(R"({"top_p":1.0})")),
            "Input validation error: `top_p` must be > 0.0 and < 1.0");
  EXPECT_EQ(invalid(params(R"({"top_p":0})")),
            "Input validation error: `top_p` must be > 0.0 and < 1.0");
  EXPECT_EQ(invalid(params(R"({"typical_p":1})")),
            "Input validation error: `typical_p` must be > 0.0 and < 1.0");
  EXPECT_EQ(invalid(params(R"({"top_k":0})")),
            "Input validation error: `top_k` must be strictly positive");
  EXPECT_EQ(invalid(params(R"({"top_k":-1})")),
            "Input validation error: `top_k` must be strictly positive");
  EXPECT_EQ(invalid(params(R"({"max_new_tokens":0})")),
            "Input validation error: `max_new_tokens` must be strictly positive");
  EXPECT_EQ(invalid(params(R"({"stop":["a","b","c","d","e"]})")),
            "Input validation error: `stop` supports up to 4 stop sequences. Given: 5");
  EXPECT_EQ(invalid(params(R"({"best_of":2,"do_sample":true,"seed":1})")),
            "Input validation error: `seed` must not be set when `best_of` > 1");
  EXPECT_EQ(invalid(params(R"({"top_n_tokens":6})")),
            "Input validation error: `top_n_tokens` must be >= 0 and <= 5. Given: 6");
  EXPECT_EQ(invalid(R"({"inputs":""})"), "Input validation error: `inputs` cannot be empty");
  EXPECT_EQ(
      invalid(params(R"({"truncate":0})")),
      "Input validation error: `truncate` must be strictly positive and less than 1023. Given: 0");
  EXPECT_EQ(invalid(params(R"({"truncate":1024})")),
            "Input validation error: `truncate` must be strictly positive and less than 1023. "
            "Given: 1024");
  EXPECT_EQ(invalid(params(R"({"truncate":1023,"top_n_tokens":5,"stop":["a","b","c","d"]})")), "");
  // Ours (fail closed; TGI would watermark): no watermark processor is built.
  EXPECT_EQ(invalid(params(R"({"watermark":true})")),
            "Input validation error: `watermark` == true is not supported: this server has no "
            "watermarking logits processor");
  EXPECT_EQ(invalid(params(R"({"watermark":false})")), "");
  // Ours (fail closed; TGI would serve the base model): no adapter is ever loaded.
  EXPECT_EQ(invalid(params(R"({"adapter_id":"org/lora"})")),
            "Input validation error: `adapter_id` `org/lora` is not loaded: this server serves no "
            "LoRA adapters");
  EXPECT_EQ(invalid(params(R"({"adapter_id":null})")), "");
}

TEST(ValidateParameters, BestOfRules) {
  EXPECT_EQ(invalid(params(R"({"best_of":2})")),
            "Input validation error: you must use sampling when `best_of` is > 1");
  EXPECT_EQ(invalid(params(R"({"best_of":2,"top_k":5})")), "");  // any warper counts as sampling
  EXPECT_EQ(invalid(R"({"inputs":"a","parameters":{"best_of":2,"temperature":0.5}})"), "");
  EXPECT_EQ(invalid(params(R"({"best_of":3,"do_sample":true})")),
            "Input validation error: `best_of` must be > 0 and <= 2. Given: 3");
  EXPECT_EQ(invalid(params(R"({"best_of":0})")), "");  // 0 behaves as 1 when not streaming
  EXPECT_EQ(invalid(params(R"({"best_of":0})"), true),
            "Input validation error: `best_of` != 1 is not supported when streaming tokens");
  EXPECT_EQ(invalid(params(R"({"best_of":2,"do_sample":true})"), true),
            "Input validation error: `best_of` != 1 is not supported when streaming tokens");
  EXPECT_EQ(
      invalid(params(R"({"decoder_input_details":true})"), true),
      "Input validation error: `decoder_input_details` == true is not supported when streaming "
      "tokens");
  EXPECT_EQ(invalid(params(R"({"decoder_input_details":true})")), "");
  ValidationLimits one = limits();
  one.max_best_of = 1;
  auto error = validate_before_permit(parse_ok(params(R"({"best_of":2})")).parameters, one, false);
  ASSERT_TRUE(error);
  EXPECT_EQ(error->error,
            "Input validation error: `best_of` != 1 is not allowed for this endpoint");
}

TEST(ValidateParameters, FirstFailureInTgisOrderWins) {
  // sampling-for-best_of before temperature, temperature before repetition_penalty, ...
  EXPECT_EQ(invalid(params(R"({"best_of":2,"repetition_penalty":0})")),
            "Input validation error: you must use sampling when `best_of` is > 1");
  EXPECT_EQ(invalid(params(R"({"temperature":0,"repetition_penalty":0})")),
            "Input validation error: `temperature` must be strictly positive");
  EXPECT_EQ(invalid(params(R"({"typical_p":2,"top_k":0})")),
            "Input validation error: `typical_p` must be > 0.0 and < 1.0");
  EXPECT_EQ(invalid(params(R"({"top_p":2,"typical_p":2})")),
            "Input validation error: `top_p` must be > 0.0 and < 1.0");
  EXPECT_EQ(invalid(params(R"({"top_k":0,"max_new_tokens":0})")),
            "Input validation error: `top_k` must be strictly positive");
  EXPECT_EQ(invalid(R"({"inputs":"","parameters":{"top_n_tokens":9}})"),
            "Input validation error: `top_n_tokens` must be >= 0 and <= 5. Given: 9");
  EXPECT_EQ(invalid(R"({"inputs":"","parameters":{"truncate":0}})"),
            "Input validation error: `inputs` cannot be empty");
  // Handler checks (best_of range) come before all of them.
  EXPECT_EQ(invalid(params(R"({"best_of":3,"temperature":0})")),
            "Input validation error: `best_of` must be > 0 and <= 2. Given: 3");
}

TEST(ValidateParameters, Defaults) {
  auto result = validate_parameters(parse_ok(R"({"inputs":"hi"})"), limits(), false);
  const auto& v = std::get<ValidGenerateRequest>(result);
  EXPECT_EQ(v.inputs, "hi");
  EXPECT_TRUE(v.do_sample);
  EXPECT_FLOAT_EQ(v.temperature, 1.0f);
  EXPECT_FLOAT_EQ(v.repetition_penalty, 1.0f);
  EXPECT_FLOAT_EQ(v.frequency_penalty, 0.0f);
  EXPECT_FLOAT_EQ(v.top_p, 1.0f);
  EXPECT_FLOAT_EQ(v.typical_p, 1.0f);
  EXPECT_EQ(v.top_k, 0u);
  EXPECT_EQ(v.best_of, 1u);
  EXPECT_FALSE(v.seed_given);
  EXPECT_FALSE(v.requested_max_new_tokens);
  auto seeded = validate_parameters(parse_ok(params(R"({"seed":42})")), limits(), false);
  EXPECT_EQ(std::get<ValidGenerateRequest>(seeded).seed, 42u);
  EXPECT_TRUE(std::get<ValidGenerateRequest>(seeded).seed_given);
  EXPECT_FALSE(std::get<ValidGenerateRequest>(seeded).do_sample);
}

// ---- lengths ----

ValidGenerateRequest valid(std::string_view body) {
  auto result = validate_parameters(parse_ok(body), limits(), false);
  EXPECT_TRUE(std::holds_alternative<ValidGenerateRequest>(result));
  return std::get<ValidGenerateRequest>(std::move(result));
}

std::string length_error(ValidGenerateRequest& v, size_t num_tokens,
                         const ValidationLimits& l = limits()) {
  auto error = validate_lengths(v, num_tokens, l);
  return error ? error->error : "";
}

TEST(ValidateLengths, AutomaticMaxNewTokens) {
  ValidGenerateRequest v = valid(R"({"inputs":"a"})");
  EXPECT_EQ(length_error(v, 10), "");
  EXPECT_EQ(v.input_length, 10u);
  EXPECT_EQ(v.max_total_new_tokens, 2038u);  // max_total_tokens - input
  EXPECT_EQ(v.max_new_tokens, 1024u);        // first piece
  ValidGenerateRequest near_limit = valid(R"({"inputs":"a"})");
  EXPECT_EQ(length_error(near_limit, 1000), "");
  EXPECT_EQ(near_limit.max_new_tokens, 1024u);
  EXPECT_EQ(near_limit.max_total_new_tokens, 1048u);
}

TEST(ValidateLengths, ExplicitMaxNewTokensIsCheckedAsOnePiece) {
  ValidGenerateRequest v = valid(params(R"({"max_new_tokens":1500})"));
  EXPECT_EQ(length_error(v, 1000), "");  // 1000 + 1024 <= 2048
  EXPECT_EQ(v.max_new_tokens, 1024u);
  EXPECT_EQ(v.max_total_new_tokens, 1500u);
  ValidGenerateRequest small = valid(params(R"({"max_new_tokens":3})"));
  EXPECT_EQ(length_error(small, 5), "");
  EXPECT_EQ(small.max_new_tokens, 3u);
  EXPECT_EQ(small.max_total_new_tokens, 3u);
}

TEST(ValidateLengths, TotalRuleReportsThePiece) {
  ValidGenerateRequest v = valid(params(R"({"max_new_tokens":1500})"));
  EXPECT_EQ(
      length_error(v, 1025),
      "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 2048. Given: 1025 "
      "`inputs` tokens and 1024 `max_new_tokens`");
  ValidGenerateRequest w = valid(params(R"({"max_new_tokens":100})"));
  EXPECT_EQ(
      length_error(w, 2000),
      "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 2048. Given: 2000 "
      "`inputs` tokens and 100 `max_new_tokens`");
  // An over-long prompt without max_new_tokens reports 0 new tokens.
  ValidGenerateRequest automatic = valid(R"({"inputs":"a"})");
  EXPECT_EQ(
      length_error(automatic, 3000),
      "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 2048. Given: 3000 "
      "`inputs` tokens and 0 `max_new_tokens`");
}

TEST(ValidateLengths, InputRuleAfterTotalRule) {
  ValidGenerateRequest v = valid(params(R"({"max_new_tokens":1})"));
  EXPECT_EQ(length_error(v, 1024),
            "Input validation error: `inputs` must have less than 1023 tokens. Given: 1024");
}

TEST(ValidateLengths, TruncateKeepsTheLastTokens) {
  ValidGenerateRequest v = valid(params(R"({"truncate":5,"max_new_tokens":2})"));
  EXPECT_EQ(length_error(v, 5000), "");
  EXPECT_EQ(v.input_length, 5u);
  EXPECT_EQ(v.max_new_tokens, 2u);
}

TEST(ValidateLengths, Grammar) {
  ValidGenerateRequest v =
      valid(params(R"({"grammar":{"type":"json","value":{"properties":{}}}})"));
  EXPECT_EQ(length_error(v, 1), "Input validation error: grammar is not supported");
  ValidationLimits with_grammar = limits();
  with_grammar.grammar_support = true;
  EXPECT_EQ(length_error(v, 1, with_grammar), "");
  ValidGenerateRequest no_properties =
      valid(params(R"({"grammar":{"type":"json","value":{"a":1}}})"));
  EXPECT_EQ(length_error(no_properties, 1, with_grammar),
            "Input validation error: grammar is not valid: Grammar must have a 'properties' field");
  ValidGenerateRequest string_json =
      valid(params(R"({"grammar":{"type":"json_object","value":"{\"properties\":{}}"}})"));
  EXPECT_EQ(string_json.grammar->type, "json");
  EXPECT_EQ(length_error(string_json, 1, with_grammar), "");
  ValidGenerateRequest bad_json =
      valid(params(R"({"grammar":{"type":"json","value":"{\"properties\":}"}})"));
  EXPECT_EQ(length_error(bad_json, 1, with_grammar),
            "Input validation error: grammar is not valid: expected value at line 1 column 15");
  ValidGenerateRequest trailing = valid(params(R"({"grammar":{"type":"json","value":"{} x"}})"));
  EXPECT_EQ(length_error(trailing, 1, with_grammar),
            "Input validation error: grammar is not valid: trailing characters at line 1 column 4");
  ValidGenerateRequest not_object = valid(params(R"({"grammar":{"type":"json","value":[1]}})"));
  EXPECT_EQ(length_error(not_object, 1, with_grammar),
            "Input validation error: grammar is not supported");
  ValidGenerateRequest regex = valid(params(R"({"grammar":{"type":"regex","value":"[a-z]+"}})"));
  EXPECT_EQ(length_error(regex, 1, with_grammar), "");
  ASSERT_TRUE(regex.grammar_spec);
  EXPECT_EQ(regex.grammar_spec->kind, GrammarKind::kRegex);
  EXPECT_EQ(regex.grammar_spec->text, "[a-z]+");
  // What admission compiles: the schema (from a string or json_schema's `schema`), its keys in
  // the order sent.
  EXPECT_EQ(string_json.grammar_spec->kind, GrammarKind::kJsonSchema);
  EXPECT_EQ(string_json.grammar_spec->text, R"({"properties":{}})");
  ValidGenerateRequest schema = valid(
      params(R"({"grammar":{"type":"json_schema","value":{"name":"n","schema":{"type":"object",)"
             R"("properties":{"z":{},"a":{}}}}}})"));
  EXPECT_EQ(length_error(schema, 1, with_grammar), "");
  EXPECT_EQ(schema.grammar_spec->text, R"({"type":"object","properties":{"z":{},"a":{}}})");
  ValidGenerateRequest any_object = valid(params(R"({"max_new_tokens":1})"));
  any_object.grammar = GrammarParameter{kAnyJsonObjectGrammar, ""};
  EXPECT_EQ(length_error(any_object, 1, with_grammar), "");
  EXPECT_EQ(any_object.grammar_spec->kind, GrammarKind::kJsonObject);
}

TEST(ApiErrorTable, StatusesAndMessages) {
  EXPECT_EQ(
      api_error_json(validation_error("`top_p` must be > 0.0 and < 1.0")),
      R"({"error":"Input validation error: `top_p` must be > 0.0 and < 1.0","error_type":"validation"})");
  EXPECT_EQ(api_error_json(overloaded_error()),
            R"({"error":"Model is overloaded","error_type":"overloaded"})");
  EXPECT_EQ(overloaded_error().status, 429);
  EXPECT_EQ(generation_error("Server error: boom").status, 424);
  EXPECT_EQ(generation_error("Server error: boom").error,
            "Request failed during generation: Server error: boom");
  EXPECT_EQ(incomplete_generation_error().status, 500);
  EXPECT_EQ(incomplete_generation_error().error_type, "incomplete_generation");
  EXPECT_EQ(
      api_error_json(incomplete_generation_stream_error()),
      R"({"error":"Incomplete generation stream","error_type":"incomplete_generation_stream"})");
  EXPECT_EQ(tokenizer_error("bad").error, "Input validation error: tokenizer error bad");
  EXPECT_EQ(tokenizer_error("bad").status, 422);
  EXPECT_EQ(template_error("template not found").error, "Template error: template not found");
  EXPECT_EQ(tool_error("x").status, 422);
  EXPECT_EQ(unhealthy_error().status, 503);
  EXPECT_EQ(api_error_json(unhealthy_error()),
            R"({"error":"unhealthy","error_type":"healthcheck"})");
  EXPECT_EQ(missing_template_variable_error("x").error, "Missing template vatiable: x");
  EXPECT_EQ(batch_size_exceeded_error(4).error,
            "Number of prompts exceeds the maximum allowed batch size of 4");
  EXPECT_EQ(api_error_status("Input validation error"), 422);
  EXPECT_EQ(api_error_status("no such type"), 500);
}

}  // namespace
}  // namespace lm
