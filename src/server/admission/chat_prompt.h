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

// The template and the token strings it is rendered with.
struct ChatTemplateContext {
  const ChatTemplate* chat_template = nullptr;  // null: no template (422 template_error)
  std::string bos_token;
  std::string eos_token;
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
                                                      const std::vector<ChatMessage>& messages);

}  // namespace lm
