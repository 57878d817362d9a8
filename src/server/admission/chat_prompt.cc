#include "server/admission/chat_prompt.h"

#include <cctype>
#include <nlohmann/json.hpp>
#include <random>

#include "template/chat_template.h"

namespace lm {
namespace {

using Json = nlohmann::json;

Result<std::string> render(const ChatTemplateContext& context,
                           const std::vector<ChatMessage>& messages,
                           const std::vector<std::string>& contents,
                           const std::string& tools_json) {
  Json list = Json::array();
  for (size_t i = 0; i < messages.size(); ++i)
    list.push_back({{"role", messages[i].role}, {"content", contents[i]}});
  ChatRenderInput input;
  input.messages_json = list.dump();
  input.tools_json = tools_json;
  input.add_generation_prompt = true;
  input.bos_token = context.bos_token;
  input.eos_token = context.eos_token;
  return context.chat_template->render(input);
}

// TGI continues a final assistant message: the prompt is cut right after the last occurrence of
// its content and right-trimmed.
void continue_final_message(std::string& text, const std::vector<ChatMessage>& messages,
                            const std::string& last_content) {
  if (messages.back().role != "assistant") return;
  const size_t at = text.rfind(last_content);
  if (at == std::string::npos) return;
  text.erase(at + last_content.size());
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\n\r\f\v");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\n\r\f\v") - b + 1);
}

// Rebuilds the prompt from the sentinel rendering with `contents` in place of the sentinels,
// recording where each content landed.
std::string substitute(const std::string& with_sentinels, const std::vector<std::string>& sentinels,
                       const std::vector<std::string>& contents,
                       std::vector<Tokenizer::TextRange>& ranges) {
  std::string out;
  size_t pos = 0;
  while (pos < with_sentinels.size()) {
    size_t next = std::string::npos;
    size_t which = 0;
    for (size_t i = 0; i < sentinels.size(); ++i) {
      const size_t at = with_sentinels.find(sentinels[i], pos);
      if (at < next) {
        next = at;
        which = i;
      }
    }
    if (next == std::string::npos) break;
    out.append(with_sentinels, pos, next - pos);
    ranges.push_back({out.size(), out.size() + contents[which].size()});
    out += contents[which];
    pos = next + sentinels[which].size();
  }
  out.append(with_sentinels, pos, std::string::npos);
  return out;
}

bool has_special_text(const Tokenizer& tokenizer, const std::string& text) {
  return tokenizer.encode(text, false, true) != tokenizer.encode(text, false, false);
}

}  // namespace

std::variant<ChatPrompt, ApiError> render_chat_prompt(const ChatTemplateContext& given,
                                                      const Tokenizer& tokenizer,
                                                      const std::vector<ChatMessage>& messages,
                                                      const ChatToolPrompt* tools) {
  ChatTemplateContext context = given;
  if (tools != nullptr && given.tool_use_template != nullptr)
    context.chat_template = given.tool_use_template;
  if (context.chat_template == nullptr) return template_error("template not found");
  std::vector<std::string> contents;
  for (const auto& m : messages) contents.push_back(m.content);
  const std::string tools_json = tools != nullptr ? tools->tools_json : std::string();
  if (tools != nullptr && !contents.empty()) {
    // NOTE: TGI asks whether the template references `tools`; here, whether rendering them
    // changes the prompt.
    auto without = render(context, messages, contents, "");
    auto with = render(context, messages, contents, tools_json);
    const bool renders_tools = without.ok() && with.ok() && *without != *with;
    contents.back() +=
        "\n---\n" + (renders_tools ? std::string() : tools_json + "\n") + tools->tool_prompt;
  }
  auto plain = render(context, messages, contents, tools_json);
  if (!plain.ok()) return template_error(plain.error().message);
  ChatPrompt prompt;
  prompt.text = std::move(*plain);
  continue_final_message(prompt.text, messages, contents.back());

  // Sentinels: letters and digits only (they survive trim/strip filters), with a random nonce
  // that appears in no content.
  std::mt19937_64 rng(std::random_device{}());
  std::string nonce;
  for (int attempt = 0; attempt < 8; ++attempt) {
    nonce = "LMSENTINEL" + std::to_string(rng());
    bool clash = false;
    for (const auto& c : contents) clash = clash || c.find(nonce) != std::string::npos;
    if (!clash) break;
  }
  std::vector<std::string> sentinels;
  for (size_t i = 0; i < messages.size(); ++i)
    sentinels.push_back(nonce + "X" + std::to_string(i) + "Z");
  auto marked = render(context, messages, sentinels, tools_json);
  if (marked.ok()) {
    continue_final_message(*marked, messages, sentinels.back());
    for (bool trimmed : {false, true}) {
      std::vector<std::string> placed = contents;
      if (trimmed) {
        for (auto& c : placed) c = trim(c);
      }
      std::vector<Tokenizer::TextRange> ranges;
      if (substitute(*marked, sentinels, placed, ranges) == prompt.text) {
        prompt.ids = tokenizer.encode(prompt.text, /*add_special_tokens=*/false, ranges);
        return prompt;
      }
    }
  }
  for (const auto& c : contents) {
    if (has_special_text(tokenizer, c)) {
      return template_error(
          "a message contains special-token text and the chat template rewrites message "
          "contents, so it cannot be kept apart from the template's own tokens");
    }
  }
  prompt.ids = tokenizer.encode(prompt.text, /*add_special_tokens=*/false);
  return prompt;
}

}  // namespace lm
