// ChatTemplate: parse once, then per render build the globals (messages, tools, documents,
// add_generation_prompt, bos/eos tokens, extras) and run the evaluator, mapping TemplateError
// to Error.
#include "template/chat_template.h"

#include <unordered_map>

#include "template/builtins.h"
#include "template/evaluator.h"
#include "template/json_value.h"
#include "template/parser.h"

namespace lm {

struct ChatTemplate::Compiled {
  jinja::Body body;
};

Result<ChatTemplate> ChatTemplate::compile(const std::string& source) {
  try {
    auto compiled = std::make_shared<Compiled>();
    compiled->body = jinja::parse_template(source);
    return ChatTemplate(std::move(compiled));
  } catch (const jinja::TemplateError& e) {
    return Error{e.what()};
  }
}

Result<std::string> ChatTemplate::render(const ChatRenderInput& input) const {
  try {
    std::unordered_map<std::string, jinja::Value> globals;
    jinja::add_globals(globals);
    globals["messages"] = jinja::parse_json_value(input.messages_json, "messages");
    globals["tools"] = input.tools_json.empty()
                           ? jinja::Value::none()
                           : jinja::parse_json_value(input.tools_json, "tools");
    globals["documents"] = jinja::Value::none();
    globals["add_generation_prompt"] = jinja::Value(input.add_generation_prompt);
    globals["bos_token"] = jinja::Value(input.bos_token);
    globals["eos_token"] = jinja::Value(input.eos_token);
    if (!input.extra_context_json.empty()) {
      const jinja::Value extra = jinja::parse_json_value(input.extra_context_json, "extra context");
      if (!extra.is_dict()) return Error{"extra context must be a JSON object"};
      for (const auto& [k, v] : extra.dict()) globals[k] = v;
    }
    jinja::Evaluator evaluator(globals, jinja::RenderLimits{});
    return evaluator.render(compiled_->body);
  } catch (const jinja::TemplateError& e) {
    return Error{e.what()};
  }
}

}  // namespace lm
