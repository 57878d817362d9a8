// Tool calling on /v1/chat/completions (spec tgi-api.md §7.3): the tool set `tool_choice`
// selects, the JSON Schema that constrains generation to TGI's call object
// {"function": {"_name": <tool>, ...arguments}}, the tools as the chat template and TGI's tool
// prompt see them, and reading the generated object back (whole, or token by token for a stream).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "server/wire/api_error.h"

namespace lm {

struct ChatTool {
  std::string name;
  std::optional<std::string> description;
  std::string parameters_json;  // the parameters JSON Schema, key order kept ("{}" if absent)
};

enum class ToolChoiceKind { kAuto, kNone, kRequired, kNamed };
struct ToolChoice {
  ToolChoiceKind kind = ToolChoiceKind::kAuto;
  std::string name;  // kNamed
};

// The synthetic function `auto` adds so the model may answer in text.
// NOTE: TGI's no_tool takes any object and, when chosen, generates the answer a second time
// without tools; here it has one string argument, `content`, which is the answer itself.
inline constexpr std::string_view kNoToolName = "no_tool";
inline constexpr std::string_view kDefaultToolPrompt =
    "\nGiven the functions available, please respond with a JSON for a function call with its "
    "proper arguments that best answers the given prompt. Respond in the format {name: function "
    "name, parameters: dictionary of argument name and its value}.Do not use variables.\n";

// Tool-list checks that need no model: every tool named, names unique, a named tool_choice among
// them, each parameters schema an object. 422 tool_error otherwise.
std::optional<ApiError> validate_tools(const std::vector<ChatTool>& tools,
                                       const ToolChoice& choice);

// The tools the model may call: all (required), all plus no_tool (auto), the named one, or none
// ("none", or no tools at all).
std::vector<ChatTool> selected_tools(const std::vector<ChatTool>& tools, const ToolChoice& choice);

// The JSON Schema of TGI's call object over `selected` (non-empty); `_name` comes first.
std::string tool_grammar_schema(const std::vector<ChatTool>& selected);

// Parallel calls (OpenAI's `parallel_tool_calls`, sent as true, with tool_choice auto or
// required): at most this many calls in one answer.
// NOTE: 8 bounds the grammar and the answer, not the tools: a call may repeat a tool (the weather
// in two cities), so the number of tools is no bound.
inline constexpr size_t kMaxParallelToolCalls = 8;
// The schema of a parallel answer: one call object, as tool_grammar_schema, or a JSON array of 1 to
// kMaxParallelToolCalls call objects over `selected` without no_tool.
// NOTE: no_tool (auto's text answer) is only ever the sole call: the array's items exclude it, so
// an answer is either text or calls, never both.
std::string parallel_tool_grammar_schema(const std::vector<ChatTool>& selected);
// The default tool prompt in parallel mode: TGI's, then how to make several calls.
std::string parallel_tool_prompt();

// The tools as TGI hands them to the template and to its tool prompt:
// [{"type":"function","function":{"description":..|null,"name":..,"arguments":"<schema JSON>"}}].
std::string template_tools_json(const std::vector<ChatTool>& selected);

// A complete generated call object.
struct ParsedToolCall {
  std::string name;
  std::string arguments;  // the other keys, compact JSON, order kept
  std::string content;    // no_tool: its content argument
  bool no_tool() const { return name == kNoToolName; }
};
std::optional<ParsedToolCall> parse_tool_call(std::string_view text);
// A complete answer: one call object, or (allow_array, parallel mode) a non-empty array of them.
std::optional<std::vector<ParsedToolCall>> parse_tool_calls(std::string_view text,
                                                            bool allow_array);

// A streamed call: text goes in token by token; out come the function's name (once known) and
// the arguments as they grow ("{" then the generated arguments), holding back the trailing
// braces and whitespace that may be the call object's own closing brace.
class ToolCallStream {
 public:
  struct Delta {
    std::optional<std::string> name;  // set on the first delta of a call
    std::string arguments;
  };
  // nullopt: nothing to send yet.
  std::optional<Delta> push(std::string_view text);
  // The rest of the arguments once generation ended, without the object's closing brace.
  std::optional<Delta> finish();
  // no_tool: the text of its `content` argument decoded so far and not yet taken ("" if none).
  // Escapes are decoded once complete.
  std::string take_content();
  bool name_known() const { return name_.has_value(); }
  bool is_no_tool() const { return name_ && *name_ == kNoToolName; }
  const std::string& text() const { return text_; }

 private:
  std::string arguments_so_far(bool final) const;

  std::string text_;
  std::optional<std::string> name_;
  size_t after_name_ = 0;    // offset in text_ just past the name's closing quote
  size_t sent_ = 0;          // bytes of the arguments already sent
  size_t content_sent_ = 0;  // no_tool: bytes of the decoded content already taken
  bool name_sent_ = false;
};

}  // namespace lm
