#include "server/openai/openai_request.h"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

#include "server/wire/json_text.h"
#include "server/wire/serde_json_reader.h"

namespace lm {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kDeserializePrefix =
    "Failed to deserialize the JSON body into the target type: ";

// A shape error while reading one body: where, and what was wrong.
struct ShapeError {
  std::string message;
};

std::string type_name(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::boolean:
      return std::string("boolean `") + (v.get<bool>() ? "true" : "false") + "`";
    case Json::value_t::string:
      return "string " + v.dump();
    case Json::value_t::array:
      return "sequence";
    case Json::value_t::object:
      return "map";
    default:
      return v.dump().size() < 40
                 ? (v.is_number_integer() ? "integer `" : "floating point `") + v.dump() + "`"
                 : "number";
  }
}

[[noreturn]] void fail_type(const std::string& path, const Json& v, std::string_view expected) {
  throw ShapeError{path + ": invalid type: " + type_name(v) + ", expected " +
                   std::string(expected)};
}

// The body as a JSON value: serde's syntax errors (400) first, trailing bytes ignored as axum 0.7
// does; then the top level must be an object.
std::variant<Json, BodyRejection> parse_body(std::string_view body) {
  SerdeJsonReader reader(body);
  std::string raw;
  if (!reader.read_raw(raw)) {
    const SerdeError& error = reader.error();
    if (error.kind == SerdeErrorKind::kSyntax)
      return BodyRejection{400, "Failed to parse the request body as JSON: " + error.message};
    return BodyRejection{422, std::string(kDeserializePrefix) + error.message};
  }
  Json value = Json::parse(raw, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded())
    return BodyRejection{400, "Failed to parse the request body as JSON: invalid JSON"};
  if (!value.is_object()) {
    return BodyRejection{422, std::string(kDeserializePrefix) + "invalid type: " +
                                  type_name(value) + ", expected a request object"};
  }
  return value;
}

// The member `key` unless absent or null.
const Json* member(const Json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<float> opt_f32(const Json& object, const char* key) {
  const Json* v = member(object, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) fail_type(key, *v, "f32");
  return v->get<float>();
}

std::optional<uint64_t> opt_u64(const Json& object, const char* key, std::string_view rust_type) {
  const Json* v = member(object, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number_integer()) fail_type(key, *v, rust_type);
  if (v->is_number_integer() && !v->is_number_unsigned() && v->get<int64_t>() < 0) {
    throw ShapeError{std::string(key) + ": invalid value: integer `" + v->dump() + "`, expected " +
                     std::string(rust_type)};
  }
  return v->get<uint64_t>();
}

std::optional<uint32_t> opt_u32(const Json& object, const char* key) {
  auto v = opt_u64(object, key, "u32");
  if (v && *v > UINT32_MAX) {
    throw ShapeError{std::string(key) + ": invalid value: integer `" + std::to_string(*v) +
                     "`, expected u32"};
  }
  return v ? std::optional<uint32_t>(static_cast<uint32_t>(*v)) : std::nullopt;
}

bool opt_bool(const Json& object, const char* key) {
  const Json* v = member(object, key);
  if (v == nullptr) return false;
  if (!v->is_boolean()) fail_type(key, *v, "a boolean");
  return v->get<bool>();
}

std::optional<std::string> opt_string(const Json& object, const char* key) {
  const Json* v = member(object, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) fail_type(key, *v, "a string");
  return v->get<std::string>();
}

// A string or a list of strings (`stop`, `prompt`).
std::vector<std::string> string_or_list(const Json& object, const char* key) {
  const Json* v = member(object, key);
  if (v == nullptr) return {};
  if (v->is_string()) return {v->get<std::string>()};
  if (!v->is_array()) fail_type(key, *v, "a string or a sequence of strings");
  std::vector<std::string> out;
  for (size_t i = 0; i < v->size(); ++i) {
    const Json& e = (*v)[i];
    if (!e.is_string()) fail_type(std::string(key) + "[" + std::to_string(i) + "]", e, "a string");
    out.push_back(e.get<std::string>());
  }
  return out;
}

// One token-id prompt: a sequence of ids, each an int32 >= 0 (the vocabulary is checked at
// admission).
std::vector<int32_t> token_ids(const Json& v, const std::string& path) {
  if (!v.is_array()) fail_type(path, v, "a sequence of token ids");
  std::vector<int32_t> out;
  for (size_t i = 0; i < v.size(); ++i) {
    const Json& e = v[i];
    const std::string at = path + "[" + std::to_string(i) + "]";
    if (!e.is_number_integer()) fail_type(at, e, "a token id");
    if (!e.is_number_unsigned() || e.get<uint64_t>() > static_cast<uint64_t>(INT32_MAX))
      throw ShapeError{at + ": invalid value: integer `" + e.dump() + "`, expected a token id"};
    out.push_back(static_cast<int32_t>(e.get<uint64_t>()));
  }
  return out;
}

// OpenAI's `prompt`: a string or a list of strings (into `prompts`), or a list of token ids or a
// list of such lists (into `prompt_ids`).
void read_prompt(const Json& body, CompletionRequest& r) {
  const Json* v = member(body, "prompt");
  if (v == nullptr) throw ShapeError{"missing field `prompt`"};
  if (!v->is_array() || v->empty() || (*v)[0].is_string()) {
    r.prompts = string_or_list(body, "prompt");
  } else if ((*v)[0].is_array()) {
    for (size_t i = 0; i < v->size(); ++i)
      r.prompt_ids.push_back(token_ids((*v)[i], "prompt[" + std::to_string(i) + "]"));
  } else {
    r.prompt_ids.push_back(token_ids(*v, "prompt"));
  }
}

// TGI's flattening of message content: a string, or parts (text as-is, images as markdown).
std::string flatten_content(const Json& content, const std::string& path) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) fail_type(path, content, "a string or a sequence of content parts");
  std::string out;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    const std::string at = path + "[" + std::to_string(i) + "]";
    if (!part.is_object()) fail_type(at, part, "a content part object");
    auto type = opt_string(part, "type");
    if (!type) throw ShapeError{at + ": missing field `type`"};
    if (*type == "text") {
      auto text = opt_string(part, "text");
      if (!text) throw ShapeError{at + ": missing field `text`"};
      out += *text;
    } else if (*type == "image_url") {
      const Json* image = member(part, "image_url");
      if (image == nullptr || !image->is_object())
        throw ShapeError{at + ": missing field `image_url`"};
      auto url = opt_string(*image, "url");
      if (!url) throw ShapeError{at + ".image_url: missing field `url`"};
      out += "![](" + *url + ")";
    } else {
      throw ShapeError{at + ".type: unknown variant `" + *type +
                       "`, expected `text` or `image_url`"};
    }
  }
  return out;
}

// An assistant tool-call message reaches the template as the JSON of its calls, each
// function.arguments re-serialized as a JSON string (TGI).
std::string tool_calls_content(const Json& calls, const std::string& path) {
  if (!calls.is_array()) fail_type(path, calls, "a sequence of tool calls");
  Json out = Json::array();
  for (const Json& call : calls) {
    if (!call.is_object()) fail_type(path, call, "a tool call object");
    Json c = call;
    if (auto f = c.find("function"); f != c.end() && f->is_object()) {
      if (auto a = f->find("arguments"); a != f->end()) *a = a->dump();
    }
    out.push_back(std::move(c));
  }
  return out.dump();
}

std::vector<ChatMessage> read_messages(const Json& body) {
  auto it = body.find("messages");
  if (it == body.end()) throw ShapeError{"missing field `messages`"};
  if (!it->is_array()) fail_type("messages", *it, "a sequence of messages");
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& m = (*it)[i];
    const std::string path = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) fail_type(path, m, "a message object");
    ChatMessage message;
    auto role = opt_string(m, "role");
    if (!role) throw ShapeError{path + ": missing field `role`"};
    message.role = *role;
    if (const Json* content = member(m, "content")) {
      message.content = flatten_content(*content, path + ".content");
    } else if (const Json* calls = member(m, "tool_calls")) {
      message.content = tool_calls_content(*calls, path + ".tool_calls");
    } else {
      throw ShapeError{path + ": missing field `content`"};
    }
    out.push_back(std::move(message));
  }
  return out;
}

template <typename T, typename Fill>
std::variant<T, BodyRejection> parse_with(std::string_view body, Fill fill) {
  auto value = parse_body(body);
  if (auto* rejection = std::get_if<BodyRejection>(&value)) return std::move(*rejection);
  try {
    T request;
    fill(std::get<Json>(value), request);
    return request;
  } catch (const ShapeError& e) {
    return BodyRejection{422, std::string(kDeserializePrefix) + e.message};
  } catch (const Json::exception& e) {
    return BodyRejection{422, std::string(kDeserializePrefix) + e.what()};
  }
}

// `response_format` onto TGI's grammar: OpenAI's {"type":"text"} (none), {"type":"json_object"}
// (any JSON object) and {"type":"json_schema","json_schema":{"name","schema","strict"}}, and
// TGI's own {"type": "json" | "json_object" | "regex" | "json_schema", "value": ...}. Read from
// an order-keeping parse: a schema's property order is the order its keys are generated in.
std::optional<GrammarParameter> read_response_format(const nlohmann::ordered_json& format) {
  constexpr std::string_view kPath = "response_format";
  if (!format.is_object()) throw ShapeError{std::string(kPath) + ": invalid type, expected a map"};
  auto type_it = format.find("type");
  if (type_it == format.end() || !type_it->is_string())
    throw ShapeError{std::string(kPath) + ": missing field `type`"};
  const std::string type = type_it->get<std::string>();
  auto value = format.find("value");
  const bool has_value = value != format.end() && !value->is_null();
  if (type == "text" && !has_value) return std::nullopt;
  if (type == "json_object" && !has_value) return GrammarParameter{kAnyJsonObjectGrammar, ""};
  if (type == "json_schema" && !has_value) {
    auto spec = format.find("json_schema");
    if (spec == format.end() || !spec->is_object())
      throw ShapeError{std::string(kPath) + ": missing field `json_schema`"};
    auto schema = spec->find("schema");
    if (schema == spec->end() || schema->is_null())
      return GrammarParameter{kAnyJsonObjectGrammar, ""};
    return GrammarParameter{"json_schema", nlohmann::ordered_json{{"schema", *schema}}.dump()};
  }
  if (type != "json" && type != "json_object" && type != "regex" && type != "json_schema") {
    throw ShapeError{std::string(kPath) + ".type: unknown variant `" + type +
                     "`, expected one of `text`, `json`, `json_object`, `regex`, `json_schema`"};
  }
  if (!has_value) throw ShapeError{std::string(kPath) + ": missing field `value`"};
  if (type == "regex" && !value->is_string())
    throw ShapeError{std::string(kPath) + ".value: invalid type, expected a string"};
  if (type == "json_schema" && !(value->is_object() && value->contains("schema")))
    throw ShapeError{std::string(kPath) + ".value: missing field `schema`"};
  return GrammarParameter{type == "json_object" ? "json" : type, value->dump()};
}

// The body's `response_format`, re-read keeping key order (the body is valid JSON by now).
std::optional<GrammarParameter> read_response_format(std::string_view body) {
  SerdeJsonReader reader(body);
  std::string raw;
  reader.read_raw(raw);
  const auto ordered = nlohmann::ordered_json::parse(raw, nullptr, /*allow_exceptions=*/false);
  auto it = ordered.find("response_format");
  if (it == ordered.end() || it->is_null()) return std::nullopt;
  return read_response_format(*it);
}

// `tools` (OpenAI function tools), read keeping key order: a schema's property order is the
// order arguments are generated in.
std::vector<ChatTool> read_tools(const nlohmann::ordered_json& tools) {
  std::vector<ChatTool> out;
  for (size_t i = 0; i < tools.size(); ++i) {
    const auto& tool = tools[i];
    const std::string at = "tools[" + std::to_string(i) + "]";
    if (!tool.is_object()) throw ShapeError{at + ": invalid type, expected struct Tool"};
    auto function = tool.find("function");
    if (function == tool.end() || !function->is_object())
      throw ShapeError{at + ": missing field `function`"};
    auto name = function->find("name");
    if (name == function->end() || name->is_null())
      throw ShapeError{at + ".function: missing field `name`"};
    if (!name->is_string())
      throw ShapeError{at + ".function.name: invalid type, expected a string"};
    ChatTool t;
    t.name = name->get<std::string>();
    if (auto d = function->find("description"); d != function->end() && !d->is_null()) {
      if (!d->is_string())
        throw ShapeError{at + ".function.description: invalid type, expected a string"};
      t.description = d->get<std::string>();
    }
    auto parameters = function->find("parameters");
    if (parameters == function->end() || parameters->is_null())
      parameters = function->find("arguments");  // TGI's alias
    t.parameters_json = parameters == function->end() || parameters->is_null() ? std::string("{}")
                                                                               : parameters->dump();
    out.push_back(std::move(t));
  }
  return out;
}

// "auto" | "none" | "required" | any other string (a tool's name, as TGI reads it) |
// {"type":"function","function":{"name":...}}.
ToolChoice read_tool_choice(const Json& choice) {
  if (choice.is_string()) {
    const std::string s = choice.get<std::string>();
    if (s == "auto") return {};
    if (s == "none") return {ToolChoiceKind::kNone, ""};
    if (s == "required") return {ToolChoiceKind::kRequired, ""};
    return {ToolChoiceKind::kNamed, s};
  }
  if (!choice.is_object()) fail_type("tool_choice", choice, "a string or a function object");
  const Json* function = member(choice, "function");
  if (function == nullptr || !function->is_object())
    throw ShapeError{"tool_choice: missing field `function`"};
  auto name = opt_string(*function, "name");
  if (!name) throw ShapeError{"tool_choice.function: missing field `name`"};
  return {ToolChoiceKind::kNamed, *name};
}

// OpenAI's logit_bias: an object of token ids (as strings) to numbers; null or absent is none.
std::vector<std::pair<std::string, double>> read_logit_bias(const Json& b) {
  std::vector<std::pair<std::string, double>> out;
  const Json* bias = member(b, "logit_bias");
  if (bias == nullptr || bias->is_null()) return out;
  if (!bias->is_object()) fail_type("logit_bias", *bias, "a map of token ids to biases");
  for (const auto& [key, value] : bias->items()) {
    if (!value.is_number()) fail_type("logit_bias." + key, value, "a number");
    out.emplace_back(key, value.get<double>());
  }
  return out;
}

nlohmann::ordered_json ordered_member(std::string_view body, const char* key) {
  SerdeJsonReader reader(body);
  std::string raw;
  reader.read_raw(raw);
  auto ordered = nlohmann::ordered_json::parse(raw, nullptr, /*allow_exceptions=*/false);
  auto it = ordered.find(key);
  return it == ordered.end() ? nlohmann::ordered_json() : *it;
}

}  // namespace

std::variant<ChatRequest, BodyRejection> parse_chat_request(std::string_view body) {
  return parse_with<ChatRequest>(body, [body](const Json& b, ChatRequest& r) {
    r.model = opt_string(b, "model");
    r.messages = read_messages(b);
    r.frequency_penalty = opt_f32(b, "frequency_penalty");
    r.presence_penalty = opt_f32(b, "presence_penalty");
    r.logit_bias = read_logit_bias(b);
    r.temperature = opt_f32(b, "temperature");
    r.top_p = opt_f32(b, "top_p");
    r.logprobs = opt_bool(b, "logprobs");
    r.top_logprobs = opt_u32(b, "top_logprobs");
    r.max_tokens = opt_u32(b, "max_tokens");
    if (!r.max_tokens) r.max_tokens = opt_u32(b, "max_completion_tokens");
    r.n = opt_u64(b, "n", "usize").value_or(1);
    r.stop = string_or_list(b, "stop");
    r.stream = opt_bool(b, "stream");
    if (const Json* options = member(b, "stream_options")) {
      if (!options->is_object()) fail_type("stream_options", *options, "struct StreamOptions");
      r.include_usage = opt_bool(*options, "include_usage");
    }
    r.seed = opt_u64(b, "seed", "u64");
    if (const Json* tools = member(b, "tools")) {
      if (!tools->is_array()) fail_type("tools", *tools, "a sequence of tools");
      r.has_tools = true;
      r.tools = read_tools(ordered_member(body, "tools"));
    }
    if (const Json* choice = member(b, "tool_choice")) r.tool_choice = read_tool_choice(*choice);
    r.tool_prompt = opt_string(b, "tool_prompt").value_or("");
    if (const Json* parallel = member(b, "parallel_tool_calls")) {
      if (!parallel->is_boolean()) fail_type("parallel_tool_calls", *parallel, "a boolean");
      r.parallel_tool_calls = parallel->get<bool>();
    }
    r.uses_tools = !selected_tools(r.tools, r.tool_choice).empty();
    // A user tool named no_tool (allowed with `required`) could not be told from the synthetic
    // one inside an array: such a request keeps the single call.
    const bool names_no_tool = std::any_of(r.tools.begin(), r.tools.end(),
                                           [](const ChatTool& t) { return t.name == kNoToolName; });
    r.parallel_calls = r.uses_tools && r.parallel_tool_calls == true && !names_no_tool &&
                       (r.tool_choice.kind == ToolChoiceKind::kAuto ||
                        r.tool_choice.kind == ToolChoiceKind::kRequired);
    r.has_response_format = member(b, "response_format") != nullptr;
    if (r.has_response_format) r.response_format = read_response_format(body);
  });
}

std::variant<CompletionRequest, BodyRejection> parse_completion_request(std::string_view body) {
  return parse_with<CompletionRequest>(body, [](const Json& b, CompletionRequest& r) {
    r.model = opt_string(b, "model");
    read_prompt(b, r);
    r.max_tokens = opt_u32(b, "max_tokens");
    r.temperature = opt_f32(b, "temperature");
    r.top_p = opt_f32(b, "top_p");
    r.repetition_penalty = opt_f32(b, "repetition_penalty");
    r.frequency_penalty = opt_f32(b, "frequency_penalty");
    r.presence_penalty = opt_f32(b, "presence_penalty");
    r.logit_bias = read_logit_bias(b);
    r.stop = string_or_list(b, "stop");
    r.stream = opt_bool(b, "stream");
    r.seed = opt_u64(b, "seed", "u64");
    r.has_suffix = member(b, "suffix") != nullptr;
    r.echo = opt_bool(b, "echo");
    r.logprobs = opt_u32(b, "logprobs");
    r.n = opt_u64(b, "n", "usize").value_or(1);
  });
}

InvocationShape invocation_shape(std::string_view body) {
  Json value = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  // Malformed JSON goes to the generate parser, which rejects it with serde's message.
  if (value.is_discarded()) return InvocationShape::kGenerate;
  if (!value.is_object()) return InvocationShape::kNone;
  if (value.contains("inputs")) return InvocationShape::kGenerate;
  if (value.contains("messages")) return InvocationShape::kChat;
  if (value.contains("prompt")) return InvocationShape::kCompletion;
  return InvocationShape::kNone;
}

namespace {

std::optional<ApiError> check_n(uint64_t n, uint64_t max_n) {
  if (n == 0 || n > max_n) {
    return validation_error("`n` must be > 0 and <= " + std::to_string(max_n) +
                            ". Given: " + std::to_string(n));
  }
  return std::nullopt;
}

// The number of alternatives per token (`top_logprobs` / `logprobs`) against --max-top-n-tokens.
std::optional<ApiError> check_top_n(const std::optional<uint32_t>& value, const char* name,
                                    const ValidationLimits& limits) {
  if (value && *value > limits.max_top_n_tokens) {
    return validation_error(std::string("`") + name +
                            "` must be >= 0 and <= " + std::to_string(limits.max_top_n_tokens) +
                            ". Given: " + std::to_string(*value));
  }
  return std::nullopt;
}

// Each key a token id (a decimal integer >= 0), each bias in [-100, 100] as OpenAI documents.
std::optional<ApiError> check_logit_bias(const std::vector<std::pair<std::string, double>>& bias) {
  for (const auto& [key, value] : bias) {
    const bool digits =
        !key.empty() && key.size() <= 9 &&
        std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) {
      return validation_error("`logit_bias` keys must be token ids. Given: " + json_string(key));
    }
    if (!(value >= -100.0 && value <= 100.0)) {
      return validation_error("`logit_bias` values must be >= -100 and <= 100. Given: " +
                              std::to_string(value) + " for token " + key);
    }
  }
  return std::nullopt;
}

std::optional<ApiError> check_penalty(const std::optional<float>& value, const char* name) {
  if (value && !(*value >= -2.0f && *value <= 2.0f)) {
    return validation_error(std::string("`") + name + "` must be >= -2.0 and <= 2.0");
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> validate_chat_request(const ChatRequest& request,
                                              const ValidationLimits& limits, uint64_t max_n) {
  if (request.has_response_format && request.has_tools)
    return tool_error("Grammar and tools are mutually exclusive");
  if (request.has_tools && request.tool_choice.kind != ToolChoiceKind::kNone) {
    if (auto e = validate_tools(request.tools, request.tool_choice)) return e;
  }
  if (request.messages.empty()) return validation_error("`messages` must not be empty");
  static constexpr std::string_view kRoles[] = {"system", "developer", "user", "assistant", "tool"};
  for (size_t i = 0; i < request.messages.size(); ++i) {
    const std::string& role = request.messages[i].role;
    if (std::find(std::begin(kRoles), std::end(kRoles), role) == std::end(kRoles)) {
      return validation_error(
          "`messages[" + std::to_string(i) + "].role` must be one of " +
          "system, developer, user, assistant or tool. Given: " + json_string(role));
    }
  }
  if (auto e = check_n(request.n, max_n)) return e;
  if (auto e = check_top_n(request.top_logprobs, "top_logprobs", limits)) return e;
  if (auto e = check_logit_bias(request.logit_bias)) return e;
  return check_penalty(request.presence_penalty, "presence_penalty");
}

std::optional<ApiError> validate_completion_request(const CompletionRequest& request,
                                                    const ValidationLimits& limits, uint64_t max_n,
                                                    size_t max_prompts,
                                                    bool prompt_logprobs_enabled) {
  if (request.has_suffix) return suffix_not_supported_error();
  if (request.num_prompts() == 0) {
    return validation_error("Empty array detected. Do not use an empty array for the prompt.");
  }
  if (request.num_prompts() > max_prompts) return batch_size_exceeded_error(max_prompts);
  if (auto e = check_n(request.n, max_n)) return e;
  if (auto e = check_top_n(request.logprobs, "logprobs", limits)) return e;
  // Fail closed: echo with logprobs must not come back without the prompt's logprobs.
  if (request.echo && request.logprobs && !prompt_logprobs_enabled) {
    return validation_error(
        "`echo` with `logprobs` returns the prompt's logprobs, which this server computes only "
        "when started with --enable-prefill-logprobs");
  }
  if (auto e = check_logit_bias(request.logit_bias)) return e;
  return check_penalty(request.presence_penalty, "presence_penalty");
}

namespace {

// The fields both OpenAI request kinds share, mapped as TGI maps them.
template <typename OpenAiRequest>
GenerateParameters shared_generate_parameters(const OpenAiRequest& request) {
  GenerateParameters p;
  // temperature 0 -> greedy with the temperature unset; anything else (absent too) samples.
  if (request.temperature && *request.temperature == 0.0f) {
    p.do_sample = false;
  } else {
    p.do_sample = true;
    p.temperature = request.temperature;
  }
  // NOTE: TGI rejects top_p == 1.0; OpenAI's default value means "off", so it is dropped here.
  p.top_p = request.top_p && *request.top_p == 1.0f ? std::nullopt : request.top_p;
  p.frequency_penalty = request.frequency_penalty;
  p.max_new_tokens = request.max_tokens;
  p.stop = request.stop;
  p.seed = request.seed;
  p.details = true;
  // NOTE: TGI takes a `model` other than "tgi" as a LoRA adapter id and serves unknown ones with
  // the base model. OpenAI clients fill `model` with anything (the served repo id, a name their
  // code was written for), so with no adapters every model string is served by the base model
  // and echoed back, as TGI and llama.cpp do; only an explicit `adapter_id` is refused.
  return p;
}

template <typename OpenAiRequest>
AdmissionRequest shared_admission_request(const OpenAiRequest& request,
                                          GenerateParameters parameters) {
  AdmissionRequest out;
  out.parameters = std::move(parameters);
  out.streaming = request.stream;
  out.n = request.n;
  // NOTE: OpenAI's presence_penalty goes to the engine's own presence penalty (logit -= penalty
  // once a token occurred). TGI maps it to repetition_penalty = presence_penalty + 2, which turns
  // OpenAI's default 0 into a strong repetition penalty and -2 into an error: a plain bug.
  out.presence_penalty = request.presence_penalty.value_or(0.0f);
  // Checked by validate_*_request: decimal ids that fit an int32, biases in [-100, 100].
  for (const auto& [key, value] : request.logit_bias) {
    int32_t id = 0;
    if (std::from_chars(key.data(), key.data() + key.size(), id).ec == std::errc())
      out.logit_bias.emplace_back(id, static_cast<float>(value));
  }
  return out;
}

}  // namespace

GenerateParameters chat_generate_parameters(const ChatRequest& request) {
  GenerateParameters p = shared_generate_parameters(request);
  if (request.top_logprobs) p.top_n_tokens = request.top_logprobs;
  p.grammar = request.response_format;
  if (request.parallel_calls) {
    // Server-made: an array is no schema TGI's grammar rules take (no top-level `properties`).
    p.grammar = GrammarParameter{kToolCallsGrammar, parallel_tool_grammar_schema(selected_tools(
                                                        request.tools, request.tool_choice))};
  } else if (request.uses_tools) {
    p.grammar = GrammarParameter{
        "json", tool_grammar_schema(selected_tools(request.tools, request.tool_choice))};
  }
  return p;
}

GenerateParameters completion_generate_parameters(const CompletionRequest& request) {
  GenerateParameters p = shared_generate_parameters(request);
  p.repetition_penalty = request.repetition_penalty;
  if (request.logprobs) p.top_n_tokens = request.logprobs;
  if (request.echo && request.max_tokens == 0u) p.max_new_tokens = 1;
  return p;
}

std::optional<ChatToolPrompt> chat_tool_prompt(const ChatRequest& request) {
  if (!request.uses_tools) return std::nullopt;
  std::string tool_prompt = request.tool_prompt;
  if (tool_prompt.empty()) {
    tool_prompt = request.parallel_calls ? parallel_tool_prompt() : std::string(kDefaultToolPrompt);
  }
  return ChatToolPrompt{template_tools_json(selected_tools(request.tools, request.tool_choice)),
                        std::move(tool_prompt)};
}

AdmissionRequest chat_admission_request(ChatRequest request) {
  AdmissionRequest out = shared_admission_request(request, chat_generate_parameters(request));
  out.messages = std::move(request.messages);
  out.chat_tools = chat_tool_prompt(request);
  return out;
}

AdmissionRequest completion_admission_request(CompletionRequest request) {
  AdmissionRequest out = shared_admission_request(request, completion_generate_parameters(request));
  out.prompt_logprobs = request.echo && request.logprobs.has_value();
  out.prompts = std::move(request.prompts);  // each validated as its own generation (TGI)
  out.prompt_ids = std::move(request.prompt_ids);
  return out;
}

}  // namespace lm
