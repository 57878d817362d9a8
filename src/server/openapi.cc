// OpenAPI document and /docs page (see openapi.h). Schemas mirror what generate_request.cc
// accepts and generate_response.cc / info_response.cc write; keep them in step.
#include "server/openapi.h"

#include <cstdint>
#include <limits>

#include <nlohmann/json.hpp>

namespace lm {
namespace {

using Json = nlohmann::ordered_json;

Json ref(const std::string& name) { return {{"$ref", "#/components/schemas/" + name}}; }
Json nullable_ref(const std::string& name) {
  return {{"allOf", Json::array({ref(name)})}, {"nullable", true}};
}
Json string_schema() { return {{"type", "string"}}; }
Json u32_schema() {
  return {{"type", "integer"},
          {"format", "int32"},
          {"minimum", 0},
          {"maximum", std::numeric_limits<uint32_t>::max()}};
}
Json u64_schema() {
  return {{"type", "integer"},
          {"format", "int64"},
          {"minimum", 0},
          {"maximum", std::numeric_limits<uint64_t>::max()}};
}
Json nullable(Json schema) {
  schema["nullable"] = true;
  return schema;
}
Json with(Json schema, const Json& extra) {
  for (const auto& [k, v] : extra.items()) schema[k] = v;
  return schema;
}
Json object(Json properties, Json required) {
  return {
      {"type", "object"}, {"required", std::move(required)}, {"properties", std::move(properties)}};
}

Json parameters_schema(const OpenApiOptions& o) {
  const ValidationLimits& l = o.limits;
  const Json positive_float = {{"type", "number"},
                               {"format", "float"},
                               {"minimum", 0},
                               {"exclusiveMinimum", true},
                               {"nullable", true}};
  const Json open_unit = with(positive_float, {{"maximum", 1}, {"exclusiveMaximum", true}});
  Json grammar = l.grammar_support
                     ? nullable_ref("GrammarType")
                     : Json{{"nullable", true},
                            {"enum", Json::array({nullptr})},
                            {"description", "Grammars are not supported by this server."}};
  Json p = {
      {"best_of", with(nullable(u64_schema()),
                       {{"minimum", 1},
                        {"maximum", l.max_best_of},
                        {"description",
                         "Generate best_of sequences and return the one with the highest mean "
                         "token logprob. Values > 1 require sampling, forbid `seed` and "
                         "streaming."}})},
      {"temperature", positive_float},
      {"repetition_penalty", positive_float},
      {"frequency_penalty",
       {{"type", "number"},
        {"format", "float"},
        {"minimum", -2},
        {"maximum", 2},
        {"nullable", true}}},
      {"top_k",
       {{"type", "integer"},
        {"format", "int32"},
        {"minimum", 1},
        {"maximum", std::numeric_limits<int32_t>::max()},
        {"nullable", true}}},
      {"top_p", open_unit},
      {"typical_p", open_unit},
      {"do_sample", {{"type", "boolean"}, {"default", false}}},
      {"max_new_tokens",
       with(nullable(u32_schema()), {{"minimum", 1},
                                     {"description",
                                      "Maximum number of tokens to generate; null or absent: up to "
                                      "max_total_tokens."}})},
      {"return_full_text", {{"type", "boolean"}, {"nullable", true}}},
      {"stop", {{"type", "array"}, {"items", string_schema()}, {"maxItems", l.max_stop_sequences}}},
      {"truncate", with(nullable(u64_schema()), {{"minimum", 1}, {"maximum", l.max_input_tokens}})},
      {"watermark", {{"type", "boolean"}, {"default", false}}},
      {"details", {{"type", "boolean"}, {"default", false}}},
      {"decoder_input_details",
       {{"type", "boolean"}, {"default", false}, {"description", "Not supported when streaming."}}},
      {"seed", with(nullable(u64_schema()), {{"description", "Must be null when best_of > 1."}})},
      {"top_n_tokens", with(nullable(u32_schema()), {{"maximum", l.max_top_n_tokens}})},
      {"grammar", grammar},
      {"adapter_id", {{"type", "string"}, {"nullable", true}}},
  };
  return {{"type", "object"}, {"properties", std::move(p)}};
}

Json schemas(const OpenApiOptions& o) {
  const Json token_list = {{"type", "array"}, {"items", ref("Token")}};
  const Json top_tokens = {{"type", "array"}, {"items", token_list}};
  Json s;
  s["GenerateParameters"] = parameters_schema(o);
  s["GenerateRequest"] = object({{"inputs", {{"type", "string"}, {"minLength", 1}}},
                                 {"parameters", ref("GenerateParameters")}},
                                Json::array({"inputs"}));
  s["CompatGenerateRequest"] = object({{"inputs", {{"type", "string"}, {"minLength", 1}}},
                                       {"parameters", ref("GenerateParameters")},
                                       {"stream", {{"type", "boolean"}, {"default", false}}}},
                                      Json::array({"inputs"}));
  s["GrammarType"] = {{"type", "object"},
                      {"required", Json::array({"type", "value"})},
                      {"properties",
                       {{"type",
                         {{"type", "string"},
                          {"enum", Json::array({"json", "json_object", "regex", "json_schema"})}}},
                        {"value", Json::object()}}}};
  s["FinishReason"] = {{"type", "string"},
                       {"enum", Json::array({"length", "eos_token", "stop_sequence"})}};
  s["Token"] = object({{"id", u32_schema()},
                       {"text", string_schema()},
                       {"logprob", {{"type", "number"}, {"format", "float"}, {"nullable", true}}},
                       {"special", {{"type", "boolean"}}}},
                      {"id", "text", "logprob", "special"});
  s["PrefillToken"] =
      object({{"id", u32_schema()},
              {"text", string_schema()},
              {"logprob", {{"type", "number"}, {"format", "float"}, {"nullable", true}}}},
             {"id", "text", "logprob"});
  s["BestOfSequence"] =
      object({{"generated_text", string_schema()},
              {"finish_reason", ref("FinishReason")},
              {"generated_tokens", u32_schema()},
              {"seed", nullable(u64_schema())},
              {"prefill", {{"type", "array"}, {"items", ref("PrefillToken")}}},
              {"tokens", token_list},
              {"top_tokens", top_tokens}},
             {"generated_text", "finish_reason", "generated_tokens", "seed", "prefill", "tokens"});
  s["Details"] =
      object({{"finish_reason", ref("FinishReason")},
              {"generated_tokens", u32_schema()},
              {"seed", nullable(u64_schema())},
              {"prefill", {{"type", "array"}, {"items", ref("PrefillToken")}}},
              {"tokens", token_list},
              {"best_of_sequences", {{"type", "array"}, {"items", ref("BestOfSequence")}}},
              {"top_tokens", top_tokens}},
             {"finish_reason", "generated_tokens", "seed", "prefill", "tokens"});
  s["GenerateResponse"] = object({{"generated_text", string_schema()}, {"details", ref("Details")}},
                                 Json::array({"generated_text"}));
  s["CompatGenerateResponse"] = {
      {"type", "array"}, {"items", ref("GenerateResponse")}, {"minItems", 1}, {"maxItems", 1}};
  s["StreamDetails"] = object({{"finish_reason", ref("FinishReason")},
                               {"generated_tokens", u32_schema()},
                               {"seed", nullable(u64_schema())},
                               {"input_length", u32_schema()}},
                              {"finish_reason", "generated_tokens", "seed", "input_length"});
  s["StreamResponse"] = object({{"index", u32_schema()},
                                {"token", ref("Token")},
                                {"top_tokens", token_list},
                                {"generated_text", nullable(string_schema())},
                                {"details", nullable_ref("StreamDetails")}},
                               {"index", "token", "generated_text", "details"});
  s["ErrorResponse"] = object({{"error", string_schema()}, {"error_type", string_schema()}},
                              {"error", "error_type"});
  s["SimpleToken"] = object({{"id", u32_schema()},
                             {"text", string_schema()},
                             {"start", u64_schema()},
                             {"stop", u64_schema()}},
                            {"id", "text", "start", "stop"});
  s["TokenizeResponse"] = {{"type", "array"}, {"items", ref("SimpleToken")}};
  s["Info"] = object(
      {{"model_id", string_schema()},
       {"model_sha", nullable(string_schema())},
       {"model_pipeline_tag", nullable(string_schema())},
       {"max_concurrent_requests", u64_schema()},
       {"max_best_of", u64_schema()},
       {"max_stop_sequences", u64_schema()},
       {"max_input_tokens", u64_schema()},
       {"max_total_tokens", u64_schema()},
       {"validation_workers", u64_schema()},
       {"max_client_batch_size", u64_schema()},
       {"router", string_schema()},
       {"version", string_schema()},
       {"sha", nullable(string_schema())},
       {"docker_label", nullable(string_schema())}},
      {"model_id", "model_sha", "model_pipeline_tag", "max_concurrent_requests", "max_best_of",
       "max_stop_sequences", "max_input_tokens", "max_total_tokens", "validation_workers",
       "max_client_batch_size", "router", "version", "sha", "docker_label"});
  s["ModelInfo"] = object({{"id", string_schema()},
                           {"object", string_schema()},
                           {"created", u64_schema()},
                           {"owned_by", string_schema()}},
                          {"id", "object", "created", "owned_by"});
  s["ModelsInfo"] = object(
      {{"object", string_schema()}, {"data", {{"type", "array"}, {"items", ref("ModelInfo")}}}},
      {"object", "data"});
  return s;
}

Json media(const char* type, Json schema) { return {{type, {{"schema", std::move(schema)}}}}; }
Json response(const std::string& description, Json content = nullptr) {
  Json r = {{"description", description}};
  if (!content.is_null()) r["content"] = std::move(content);
  return r;
}
Json json_error(const std::string& description) {
  return response(description, media("application/json", ref("ErrorResponse")));
}

// The axum extractor's text/plain rejections and the api-key check, common to every POST.
void add_transport_errors(Json& responses) {
  responses["400"] =
      response("Malformed JSON body (text/plain)", media("text/plain", string_schema()));
  responses["401"] = response("Missing or wrong API key (empty body)");
  responses["413"] = response("Body over the payload limit", media("text/plain", string_schema()));
  responses["415"] =
      response("Content-Type is not application/json", media("text/plain", string_schema()));
}

// 422 is either the extractor's text/plain rejection or a validation ErrorResponse.
Json unprocessable() {
  Json content = media("application/json", ref("ErrorResponse"));
  content["text/plain"] = {{"schema", string_schema()}};
  return response("Input validation error, or a JSON body of the wrong shape (text/plain)",
                  std::move(content));
}

Json post(const std::string& id, const std::string& summary, const std::string& request_schema,
          Json ok_response, bool generation_errors) {
  Json responses;
  responses["200"] = std::move(ok_response);
  add_transport_errors(responses);
  responses["422"] = unprocessable();
  if (generation_errors) {
    responses["424"] = json_error("Generation error");
    responses["429"] = json_error("Model is overloaded");
    responses["500"] = json_error("Incomplete generation");
  }
  return {{"tags", Json::array({"Text Generation Inference"})},
          {"summary", summary},
          {"operationId", id},
          {"requestBody",
           {{"required", true}, {"content", media("application/json", ref(request_schema))}}},
          {"responses", std::move(responses)}};
}

Json get(const std::string& id, const std::string& summary, Json responses) {
  return {{"tags", Json::array({"Text Generation Inference"})},
          {"summary", summary},
          {"operationId", id},
          {"responses", std::move(responses)}};
}

Json health(const std::string& id) {
  return get(id, "Health check",
             {{"200", response("Everything is working fine")},
              {"503", json_error("Text generation inference is down")}});
}

}  // namespace

std::string openapi_json(const OpenApiOptions& options) {
  const Json generated =
      response("Generated text", media("application/json", ref("GenerateResponse")));
  const Json stream = response(
      "Generated text as server-sent events (`data:` + StreamResponse "
      "JSON; errors as `data:` + ErrorResponse JSON)",
      media("text/event-stream", ref("StreamResponse")));
  Json compat_ok = response(
      "Generated text: a one-element JSON array, or server-sent events when "
      "`stream` is true",
      media("application/json", ref("CompatGenerateResponse")));
  compat_ok["content"]["text/event-stream"] = {{"schema", ref("StreamResponse")}};

  Json paths;
  paths["/"]["get"] = health("health_root");
  paths["/"]["post"] = post("compat_generate", "Generate tokens; `stream` selects JSON or SSE",
                            "CompatGenerateRequest", compat_ok, true);
  paths["/generate"]["post"] =
      post("generate", "Generate tokens", "GenerateRequest", generated, true);
  paths["/generate_stream"]["post"] =
      post("generate_stream", "Generate a stream of tokens using Server-Sent Events",
           "GenerateRequest", stream, true);
  paths["/invocations"]["post"] = post("sagemaker_compatibility", "Generate tokens (SageMaker)",
                                       "CompatGenerateRequest", compat_ok, true);
  paths["/tokenize"]["post"] =
      post("tokenize", "Tokenize inputs", "GenerateRequest",
           response("Tokenized ids", media("application/json", ref("TokenizeResponse"))), false);
  paths["/health"]["get"] = health("health");
  paths["/ping"]["get"] = health("ping");
  paths["/info"]["get"] =
      get("get_model_info", "Text Generation Inference endpoint info",
          {{"200", response("Served model info", media("application/json", ref("Info")))}});
  paths["/metrics"]["get"] =
      get("metrics", "Prometheus metrics scrape endpoint",
          {{"200", response("Prometheus metrics", media("text/plain", string_schema()))}});
  paths["/v1/models"]["get"] =
      get("openai_get_model_info", "Get model info",
          {{"200", response("Served model info", media("application/json", ref("ModelsInfo")))}});
  paths["/docs"]["get"] =
      get("docs", "API documentation page",
          {{"200", response("HTML page", media("text/html", string_schema()))}});
  paths["/api-doc/openapi.json"]["get"] = get(
      "openapi", "This OpenAPI document",
      {{"200", response("OpenAPI 3.0 document", media("application/json", {{"type", "object"}}))}});

  const Json doc = {
      {"openapi", "3.0.3"},
      {"info",
       {{"title", "Text Generation Inference"},
        {"description", "Text Generation Webserver"},
        {"license",
         {{"name", "Apache 2.0"}, {"url", "https://www.apache.org/licenses/LICENSE-2.0"}}},
        {"version", options.version}}},
      {"paths", std::move(paths)},
      {"components", {{"schemas", schemas(options)}}},
      {"tags",
       {{{"name", "Text Generation Inference"},
         {"description", "Hugging Face Text Generation Inference API"}}}},
  };
  return doc.dump();
}

std::string docs_html() {
  return R"HTML(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Text Generation Inference API</title>
<style>
body { font-family: sans-serif; margin: 2em; max-width: 70em; }
h2 { border-bottom: 1px solid #ccc; }
.method { display: inline-block; width: 4em; font-weight: bold; text-transform: uppercase; }
pre { background: #f5f5f5; padding: 0.5em; overflow-x: auto; }
</style>
</head>
<body>
<h1>Text Generation Inference API</h1>
<p>The machine-readable document is at <a href="/api-doc/openapi.json">/api-doc/openapi.json</a>.</p>
<div id="routes">Loading...</div>
<script>
fetch('/api-doc/openapi.json').then(r => r.json()).then(doc => {
  const root = document.getElementById('routes');
  root.textContent = '';
  const add = (tag, text, parent) => {
    const e = document.createElement(tag);
    if (text !== undefined) e.textContent = text;
    (parent || root).appendChild(e);
    return e;
  };
  add('h2', 'Routes');
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      const d = add('details');
      const s = add('summary', undefined, d);
      add('span', method, s).className = 'method';
      add('code', path, s);
      add('span', ' ' + (op.summary || ''), s);
      if (op.requestBody) {
        const refs = Object.values(op.requestBody.content).map(m => m.schema.$ref || '');
        add('p', 'Request body: ' + refs.join(', '), d);
      }
      const ul = add('ul', undefined, d);
      for (const [code, resp] of Object.entries(op.responses)) {
        const types = resp.content ? Object.keys(resp.content).join(', ') : 'no body';
        add('li', code + ' ' + resp.description + ' (' + types + ')', ul);
      }
    }
  }
  add('h2', 'Schemas');
  for (const [name, schema] of Object.entries(doc.components.schemas)) {
    const d = add('details');
    add('summary', name, d);
    add('pre', JSON.stringify(schema, null, 2), d);
  }
}).catch(e => { document.getElementById('routes').textContent = 'Failed to load: ' + e; });
</script>
</body>
</html>
)HTML";
}

}  // namespace lm
