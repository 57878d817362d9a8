// A compiled chat template: renders messages (+ tools) into a prompt exactly as Python jinja2
// does under transformers (trim_blocks, lstrip_blocks, loopcontrols, raise_exception,
// strftime_now, tojson with ensure_ascii=False). Immutable after compile; render is thread-safe.
#pragma once

#include <memory>
#include <string>

#include "base/result.h"

namespace lm {

struct ChatRenderInput {
  std::string
      messages_json;       // JSON array of {role, content (string or list of content parts), ...}
  std::string tools_json;  // JSON array or "" (no tools)
  bool add_generation_prompt = true;
  std::string bos_token, eos_token;
  std::string extra_context_json;  // JSON object of extra variables or ""
};

class ChatTemplate {
 public:
  static Result<ChatTemplate> compile(const std::string& source);  // syntax errors -> Error
  // Runtime errors and raise_exception -> Error carrying jinja2's message.
  Result<std::string> render(const ChatRenderInput& input) const;

 private:
  struct Compiled;
  explicit ChatTemplate(std::shared_ptr<const Compiled> compiled)
      : compiled_(std::move(compiled)) {}
  std::shared_ptr<const Compiled> compiled_;
};

}  // namespace lm
