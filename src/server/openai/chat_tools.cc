#include "server/openai/chat_tools.h"

#include <nlohmann/json.hpp>
#include <set>

namespace lm {
namespace {

using OJson = nlohmann::ordered_json;

OJson parameters_of(const ChatTool& tool) {
  OJson p = OJson::parse(tool.parameters_json, nullptr, /*allow_exceptions=*/false);
  return p.is_object() ? p : OJson::object();
}

ChatTool no_tool() {
  ChatTool t;
  t.name = std::string(kNoToolName);
  t.description = "Open ended response with no specific tool selected";
  t.parameters_json =
      R"({"type":"object","properties":{"content":{"type":"string"}},"required":["content"]})";
  return t;
}

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

}  // namespace

std::optional<ApiError> validate_tools(const std::vector<ChatTool>& tools,
                                       const ToolChoice& choice) {
  std::set<std::string> names;
  for (const ChatTool& tool : tools) {
    if (tool.name.empty()) return tool_error("every tool needs a non-empty `function.name`");
    if (!names.insert(tool.name).second)
      return tool_error("Tool name " + tool.name + " is used more than once");
    if (tool.name == kNoToolName && choice.kind == ToolChoiceKind::kAuto)
      return tool_error(std::string("Tool name ") + std::string(kNoToolName) +
                        " is reserved with tool_choice auto");
    const OJson p = OJson::parse(tool.parameters_json, nullptr, /*allow_exceptions=*/false);
    if (!p.is_object())
      return tool_error("the parameters of tool " + tool.name + " must be a JSON Schema object");
    if (auto t = p.find("type"); t != p.end() && *t != "object")
      return tool_error("the parameters of tool " + tool.name + " must have \"type\": \"object\"");
    if (auto props = p.find("properties"); props != p.end()) {
      if (!props->is_object())
        return tool_error("the `properties` of tool " + tool.name + " must be an object");
      if (props->contains("_name"))
        return tool_error("tool " + tool.name +
                          " has a parameter named `_name`, which is reserved");
    }
    if (auto req = p.find("required"); req != p.end() && !req->is_array())
      return tool_error("the `required` of tool " + tool.name + " must be an array");
  }
  if (choice.kind == ToolChoiceKind::kNamed && !names.contains(choice.name))
    return tool_error("Tool with name " + choice.name + " not found");
  return std::nullopt;
}

std::vector<ChatTool> selected_tools(const std::vector<ChatTool>& tools, const ToolChoice& choice) {
  switch (choice.kind) {
    case ToolChoiceKind::kNone:
      return {};
    case ToolChoiceKind::kRequired:
      return tools;
    case ToolChoiceKind::kNamed:
      for (const ChatTool& tool : tools) {
        if (tool.name == choice.name) return {tool};
      }
      return {};
    case ToolChoiceKind::kAuto:
      break;
  }
  if (tools.empty()) return {};  // NOTE: TGI keeps only no_tool here; plain chat is the same
  std::vector<ChatTool> out = tools;
  out.push_back(no_tool());
  return out;
}

std::string tool_grammar_schema(const std::vector<ChatTool>& selected) {
  // TGI's shape, with each function inlined in anyOf rather than referenced through
  // "$functions" (a path XGrammar's $ref does not resolve).
  OJson any_of = OJson::array();
  OJson defs = OJson::object();  // each tool's $defs, at the root where "#/$defs/.." points
  for (const ChatTool& tool : selected) {
    const OJson parameters = parameters_of(tool);
    OJson properties = OJson::object();
    properties["_name"] = {{"type", "string"}, {"const", tool.name}};
    if (auto p = parameters.find("properties"); p != parameters.end() && p->is_object()) {
      for (const auto& [key, value] : p->items()) properties[key] = value;
    }
    OJson required = OJson::array({"_name"});
    if (auto r = parameters.find("required"); r != parameters.end() && r->is_array()) {
      for (const auto& key : *r) required.push_back(key);
    }
    OJson function = {{"type", "object"},
                      {"description", tool.description.value_or("")},
                      {"properties", std::move(properties)},
                      {"required", std::move(required)}};
    // TGI allows other keys only when additionalProperties is the string "true".
    auto extra = parameters.find("additionalProperties");
    function["additionalProperties"] = extra != parameters.end() && *extra == "true";
    if (auto d = parameters.find("$defs"); d != parameters.end() && d->is_object()) {
      for (const auto& [key, value] : d->items()) defs[key] = value;
    }
    any_of.push_back(std::move(function));
  }
  OJson schema = {{"type", "object"},
                  {"properties", {{"function", {{"anyOf", std::move(any_of)}}}}},
                  {"required", {"function"}},
                  {"additionalProperties", false}};
  if (!defs.empty()) schema["$defs"] = std::move(defs);
  return schema.dump();
}

std::string parallel_tool_grammar_schema(const std::vector<ChatTool>& selected) {
  OJson one = OJson::parse(tool_grammar_schema(selected));
  std::vector<ChatTool> callable;
  for (const ChatTool& tool : selected) {
    if (tool.name != kNoToolName) callable.push_back(tool);
  }
  OJson item = OJson::parse(tool_grammar_schema(callable));
  // Both share the tools' $defs, hoisted to the root where "#/$defs/.." points.
  OJson defs = one.contains("$defs") ? one["$defs"] : OJson();
  one.erase("$defs");
  item.erase("$defs");
  OJson array = {{"type", "array"},
                 {"items", std::move(item)},
                 {"minItems", 1},
                 {"maxItems", kMaxParallelToolCalls}};
  OJson schema = {{"anyOf", OJson::array({std::move(one), std::move(array)})}};
  if (!defs.is_null()) schema["$defs"] = std::move(defs);
  return schema.dump();
}

std::string parallel_tool_prompt() {
  return std::string(kDefaultToolPrompt) +
         "To call several functions at once, respond with a JSON array of such calls.\n";
}

std::string template_tools_json(const std::vector<ChatTool>& selected) {
  OJson out = OJson::array();
  for (const ChatTool& tool : selected) {
    OJson function = OJson::object();
    function["description"] = tool.description ? OJson(*tool.description) : OJson(nullptr);
    function["name"] = tool.name;
    function["arguments"] = parameters_of(tool).dump();
    out.push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  return out.dump();
}

namespace {

std::optional<ParsedToolCall> call_of(const OJson& value) {
  if (!value.is_object()) return std::nullopt;
  auto function = value.find("function");
  if (function == value.end() || !function->is_object()) return std::nullopt;
  auto name = function->find("_name");
  if (name == function->end() || !name->is_string()) return std::nullopt;
  ParsedToolCall call;
  call.name = name->get<std::string>();
  OJson arguments = *function;
  arguments.erase("_name");
  if (call.no_tool()) {
    auto content = arguments.find("content");
    if (content != arguments.end() && content->is_string())
      call.content = content->get<std::string>();
  }
  call.arguments = arguments.dump();
  return call;
}

}  // namespace

std::optional<ParsedToolCall> parse_tool_call(std::string_view text) {
  return call_of(OJson::parse(text, nullptr, /*allow_exceptions=*/false));
}

std::optional<std::vector<ParsedToolCall>> parse_tool_calls(std::string_view text,
                                                            bool allow_array) {
  const OJson value = OJson::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!value.is_array()) {
    std::optional<ParsedToolCall> call = call_of(value);
    if (!call) return std::nullopt;
    return std::vector<ParsedToolCall>{std::move(*call)};
  }
  if (!allow_array || value.empty()) return std::nullopt;
  std::vector<ParsedToolCall> calls;
  for (const OJson& element : value) {
    std::optional<ParsedToolCall> call = call_of(element);
    // no_tool is an answer in text, never one call among others.
    if (!call || call->no_tool()) return std::nullopt;
    calls.push_back(std::move(*call));
  }
  return calls;
}

std::string ToolCallStream::arguments_so_far(bool final) const {
  // After the name: optional spaces, then "," and more arguments, or "}" (no arguments).
  size_t at = after_name_;
  while (at < text_.size() && is_space(text_[at])) ++at;
  if (at < text_.size() && text_[at] == ',') ++at;
  while (at < text_.size() && is_space(text_[at])) ++at;
  std::string out = "{";
  if (at < text_.size() && text_[at] == '}') {
    // No arguments: the function object closes right away.
    return final ? "{}" : "{";
  }
  out.append(text_, at, std::string::npos);
  size_t end = out.size();
  if (final) {
    // Drop the call object's closing brace (and the spaces around it).
    while (end > 1 && is_space(out[end - 1])) --end;
    if (end > 1 && out[end - 1] == '}') --end;
    while (end > 1 && is_space(out[end - 1])) --end;
    // The arguments object's own "}" ended a complete object; keep it.
  } else {
    while (end > 1 && (is_space(out[end - 1]) || out[end - 1] == '}')) --end;
  }
  out.resize(end);
  return out;
}

std::optional<ToolCallStream::Delta> ToolCallStream::push(std::string_view text) {
  text_ += text;
  if (!name_) {
    // The name is known once its string closes: {"function": {"_name": "<name>"
    // NOTE: TGI closes the text after each token and tries to parse it, which misses a name
    // whose closing quote shares a token with the next key's opening quote.
    const size_t key = text_.find("\"_name\"");
    if (key == std::string::npos) return std::nullopt;
    size_t at = key + 7;
    while (at < text_.size() && (is_space(text_[at]) || text_[at] == ':')) ++at;
    if (at >= text_.size() || text_[at] != '"') return std::nullopt;
    for (size_t i = at + 1; i < text_.size(); ++i) {
      if (text_[i] == '\\') {
        ++i;
      } else if (text_[i] == '"') {
        const OJson name = OJson::parse(text_.substr(at, i + 1 - at), nullptr, false);
        if (!name.is_string()) return std::nullopt;
        name_ = name.get<std::string>();
        after_name_ = i + 1;
        break;
      }
    }
    if (!name_) return std::nullopt;
  }
  if (is_no_tool()) return std::nullopt;
  const std::string arguments = arguments_so_far(false);
  Delta delta;
  if (!name_sent_) {
    name_sent_ = true;
    delta.name = name_;
  } else if (arguments.size() == sent_) {
    return std::nullopt;
  }
  delta.arguments = arguments.substr(sent_);
  sent_ = arguments.size();
  return delta;
}

std::string ToolCallStream::take_content() {
  if (!is_no_tool()) return "";
  // After the name: , "content": "<JSON string body>
  const size_t key = text_.find("\"content\"", after_name_);
  if (key == std::string::npos) return "";
  size_t at = key + 9;
  while (at < text_.size() && (is_space(text_[at]) || text_[at] == ':')) ++at;
  if (at >= text_.size() || text_[at] != '"') return "";
  // The body up to its closing quote, or to the end cut before an unfinished escape.
  size_t end = text_.size();
  size_t escape = std::string::npos;  // start of the last escape
  for (size_t i = at + 1; i < text_.size(); ++i) {
    if (text_[i] == '\\') {
      escape = i;
      i += text_.compare(i, 2, "\\u") == 0 ? 5 : 1;
      if (i >= text_.size()) end = escape;
    } else if (text_[i] == '"') {
      end = i;
      break;
    }
  }
  std::string body = text_.substr(at + 1, end - at - 1);
  OJson decoded = OJson::parse("\"" + body + "\"", nullptr, false);
  if (!decoded.is_string() && escape != std::string::npos && escape > at) {
    // A high surrogate waiting for its pair: decode up to it.
    body.resize(escape - at - 1);
    decoded = OJson::parse("\"" + body + "\"", nullptr, false);
  }
  if (!decoded.is_string()) return "";
  const std::string text = decoded.get<std::string>();
  if (text.size() <= content_sent_) return "";
  std::string out = text.substr(content_sent_);
  content_sent_ = text.size();
  return out;
}

std::optional<ToolCallStream::Delta> ToolCallStream::finish() {
  if (!name_ || is_no_tool()) return std::nullopt;
  const std::string arguments = arguments_so_far(true);
  Delta delta;
  if (!name_sent_) {
    name_sent_ = true;
    delta.name = name_;
  }
  if (arguments.size() > sent_) delta.arguments = arguments.substr(sent_);
  sent_ = std::max(sent_, arguments.size());
  return delta;
}

}  // namespace lm
