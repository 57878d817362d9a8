// Chat templates as hostile input: the input is template NUL messages-JSON NUL tools-JSON (the
// last two optional: a fixed conversation and no tools by default). The template is compiled and
// rendered under the interpreter's default limits, which must bound every template's work,
// nesting and output: a crash, a sanitizer report, a hang or a huge allocation is a finding.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_input.h"
#include "template/chat_template.h"

namespace {

constexpr const char* kConversation =
    R"([{"role": "system", "content": "You are helpful."},)"
    R"( {"role": "user", "content": "Hi <b>there</b> {{ x }}"},)"
    R"( {"role": "assistant", "content": "Hello!", "tool_calls": [{"type": "function",)"
    R"( "function": {"name": "f", "arguments": {"a": 1, "b": [true, null, 2.5]}}}]},)"
    R"( {"role": "user", "content": [{"type": "text", "text": "part"}]}])";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string_view> parts = lm::fuzz::split_parts(data, size, 3);
  auto tmpl = lm::ChatTemplate::compile(std::string(parts[0]));
  if (!tmpl.ok()) return 0;
  lm::ChatRenderInput input;
  input.messages_json = parts.size() > 1 ? std::string(parts[1]) : kConversation;
  input.tools_json = parts.size() > 2 ? std::string(parts[2]) : "";
  input.bos_token = "<s>";
  input.eos_token = "</s>";
  (void)tmpl->render(input);
  input.add_generation_prompt = false;
  input.extra_context_json = R"({"enable_thinking": false, "date_string": "26 Jul 2024"})";
  (void)tmpl->render(input);
  return 0;
}
