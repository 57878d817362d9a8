// The OpenAPI document: valid JSON, every served route and status, every $ref resolvable, and
// schemas that agree with what the parser accepts and the writers emit.
#include "server/openapi.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/tgi/generate_response.h"

namespace lm {
namespace {

using Json = nlohmann::json;

Json document() {
  OpenApiOptions options;
  options.limits.max_stop_sequences = 3;
  return Json::parse(openapi_json(options));
}

void collect_refs(const Json& node, std::vector<std::string>& refs) {
  if (node.is_object()) {
    for (const auto& [key, value] : node.items()) {
      if (key == "$ref") refs.push_back(value.get<std::string>());
      collect_refs(value, refs);
    }
  } else if (node.is_array()) {
    for (const auto& value : node) collect_refs(value, refs);
  }
}

TEST(OpenApi, HeaderAndInfo) {
  const Json doc = document();
  EXPECT_EQ(doc["openapi"], "3.0.3");
  EXPECT_EQ(doc["info"]["title"], "Text Generation Inference");
  EXPECT_EQ(doc["info"]["license"]["name"], "Apache 2.0");
}

TEST(OpenApi, EveryRoute) {
  const Json doc = document();
  const std::vector<std::pair<std::string, std::string>> routes = {
      {"/generate", "post"},
      {"/generate_stream", "post"},
      {"/", "post"},
      {"/invocations", "post"},
      {"/tokenize", "post"},
      {"/health", "get"},
      {"/", "get"},
      {"/ping", "get"},
      {"/info", "get"},
      {"/metrics", "get"},
      {"/v1/models", "get"},
      {"/docs", "get"},
      {"/api-doc/openapi.json", "get"}};
  for (const auto& [path, method] : routes) {
    ASSERT_TRUE(doc["paths"].contains(path)) << path;
    EXPECT_TRUE(doc["paths"][path].contains(method)) << method << " " << path;
  }
  std::set<std::string> ids;
  for (const auto& [path, methods] : doc["paths"].items()) {
    for (const auto& [method, op] : methods.items()) {
      EXPECT_TRUE(ids.insert(op["operationId"].get<std::string>()).second) << path;
      EXPECT_TRUE(op["responses"].contains("200")) << path;
    }
  }
}

TEST(OpenApi, PostRoutesDeclareEveryStatusWithContentType) {
  const Json doc = document();
  for (const char* path : {"/generate", "/generate_stream", "/", "/invocations", "/tokenize"}) {
    const Json& responses = doc["paths"][path]["post"]["responses"];
    for (const char* code : {"200", "400", "401", "413", "415", "422"}) {
      EXPECT_TRUE(responses.contains(code)) << path << " " << code;
    }
    EXPECT_TRUE(responses["400"]["content"].contains("text/plain"));
    EXPECT_TRUE(responses["413"]["content"].contains("text/plain"));
    EXPECT_TRUE(responses["415"]["content"].contains("text/plain"));
    EXPECT_TRUE(responses["422"]["content"].contains("text/plain"));
    EXPECT_TRUE(responses["422"]["content"].contains("application/json"));
    EXPECT_FALSE(responses["401"].contains("content"));  // empty body
  }
  for (const char* path : {"/generate", "/generate_stream", "/", "/invocations"}) {
    const Json& responses = doc["paths"][path]["post"]["responses"];
    EXPECT_TRUE(responses.contains("424")) << path;
    EXPECT_TRUE(responses.contains("429")) << path;
  }
  EXPECT_TRUE(doc["paths"]["/generate_stream"]["post"]["responses"]["200"]["content"].contains(
      "text/event-stream"));
  EXPECT_TRUE(
      doc["paths"]["/"]["post"]["responses"]["200"]["content"].contains("text/event-stream"));
}

TEST(OpenApi, EveryRefResolves) {
  const Json doc = document();
  std::vector<std::string> refs;
  collect_refs(doc, refs);
  EXPECT_GT(refs.size(), 20u);
  const std::string prefix = "#/components/schemas/";
  for (const std::string& ref : refs) {
    ASSERT_EQ(ref.rfind(prefix, 0), 0u) << ref;
    EXPECT_TRUE(doc["components"]["schemas"].contains(ref.substr(prefix.size()))) << ref;
  }
  for (const char* name :
       {"GenerateRequest", "GenerateParameters", "GenerateResponse", "Details", "StreamResponse",
        "StreamDetails", "Token", "PrefillToken", "BestOfSequence", "ErrorResponse", "Info",
        "SimpleToken", "ModelsInfo"}) {
    EXPECT_TRUE(doc["components"]["schemas"].contains(name)) << name;
  }
}

TEST(OpenApi, SchemasMatchTheWire) {
  const Json doc = document();
  const Json& s = doc["components"]["schemas"];
  const Json& p = s["GenerateParameters"]["properties"];
  EXPECT_EQ(p["stop"]["maxItems"], 3);
  EXPECT_FALSE(p["stop"].contains("nullable"));  // null is a 422 for `stop`
  EXPECT_FALSE(p["do_sample"].contains("nullable"));
  EXPECT_TRUE(p["temperature"]["nullable"]);
  EXPECT_TRUE(p["seed"]["nullable"]);
  EXPECT_EQ(p["details"]["default"], false);
  EXPECT_EQ(s["GenerateRequest"]["required"], Json::array({"inputs"}));
  EXPECT_TRUE(s["Token"]["properties"]["logprob"]["nullable"]);
  EXPECT_TRUE(s["StreamResponse"]["properties"]["generated_text"]["nullable"]);
  EXPECT_TRUE(s["StreamResponse"]["properties"]["details"]["nullable"]);
  EXPECT_TRUE(s["Info"]["properties"]["model_sha"]["nullable"]);
  EXPECT_EQ(s["Info"]["required"].size(), 14u);
  // Every key /generate writes with details is declared, and required ones are always written.
  GenerateResponseBody body;
  body.include_details = true;
  body.result.finish_reason = "length";
  body.result.tokens = {ResponseToken{1, "a", -1.0f, false}};
  body.result.top_tokens = {{ResponseToken{1, "a", -1.0f, false}}};
  const Json response = Json::parse(generate_response_json(body));
  for (const auto& [key, value] : response["details"].items()) {
    EXPECT_TRUE(s["Details"]["properties"].contains(key)) << key;
  }
  for (const auto& key : s["Details"]["required"]) {
    EXPECT_TRUE(response["details"].contains(key.get<std::string>())) << key;
  }
}

TEST(OpenApi, DocsPageIsSelfContained) {
  const std::string html = docs_html();
  EXPECT_NE(html.find("/api-doc/openapi.json"), std::string::npos);
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("<script src"), std::string::npos);
}

}  // namespace
}  // namespace lm
