// The prompt of a chat request: messages rendered with the model's chat template (TGI's context:
// messages, bos/eos_token, add_generation_prompt, tools = none; a final assistant message is
// continued), then tokenized so that only the template's own text can yield special tokens.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "server/wire/api_error.h"
#include "tokenizer/tokenizer.h"

namespace lm {

class ChatTemplate;

// One chat message, content flattened as TGI does (text parts joined, images as markdown).
struct ChatMessage {
  std::string role;
  std::string content;
};

// Tools for the template (TGI): `tools_json` goes to the template's `tools`; the last message gets
// "\n---\n" + tool_prompt, preceded by the tools' JSON when the template does not render them.
struct ChatToolPrompt {
  std::string tools_json;
  std::string tool_prompt;
};

// The template and the token strings it is rendered with.
struct ChatTemplateContext {
  const ChatTemplate* chat_template = nullptr;  // null: no template (422 template_error)
  std::string bos_token;
  std::string eos_token;
  // Rendered instead for a request with tools, as transformers' apply_chat_template picks a
  // model's named "tool_use" template; null: chat_template serves those too.
  const ChatTemplate* tool_use_template = nullptr;
};

struct ChatPrompt {
  std::string text;  // the rendered prompt (TGI's templated_text)
  std::vector<int32_t> ids;
};

// NOTE: the template is rendered with every message content replaced by a unique sentinel; the
// contents are put back and their byte ranges are tokenized without special-token parsing, so
// typed "<|im_end|>" stays text. A template that rewrites contents (the sentinels no longer map
// back onto the plain rendering) falls back to plain tokenization when no content holds special-
// token text, and is refused (422 template_error) otherwise.
std::variant<ChatPrompt, ApiError> render_chat_prompt(const ChatTemplateContext& context,
                                                      const Tokenizer& tokenizer,
                                                      const std::vector<ChatMessage>& messages,
                                                      const ChatToolPrompt* tools = nullptr);

}  // namespace lm
