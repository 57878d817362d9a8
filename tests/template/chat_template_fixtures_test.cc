// Every committed chat template (tests/fixtures/templates/sources) rendered with every committed
// conversation must match Python jinja2's output byte for byte, or fail with the same message
// (fixtures from scripts/fixtures/make_template_references.py).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "base/text_file.h"
#include "template/builtins.h"
#include "template/chat_template.h"

namespace lm {
namespace {

using Json = nlohmann::ordered_json;
const std::string kDir = std::string(LM_REPO_ROOT) + "/tests/fixtures/templates/";
constexpr std::time_t kFixedTime = 1721984703;  // 2024-07-26 09:05:03, the script's FIXED_TIME

Json load(const std::string& name) {
  auto text = read_text_file(kDir + name);
  EXPECT_TRUE(text.ok()) << name;
  return text.ok() ? Json::parse(*text) : Json();
}

TEST(ChatTemplateFixtures, MatchPythonJinja) {
  jinja::set_strftime_now_for_testing(kFixedTime);
  const Json conversations = load("conversations.json");
  const Json expected = load("expected.json");
  ASSERT_GE(expected.size(), 30u);
  int num_cases = 0, num_passed = 0;
  for (const auto& [name, cases] : expected.items()) {
    auto source = read_text_file(kDir + "sources/" + name + ".jinja");
    ASSERT_TRUE(source.ok()) << name;
    auto tpl = ChatTemplate::compile(*source);
    EXPECT_TRUE(tpl.ok()) << name << ": " << (tpl.ok() ? "" : tpl.error().message);
    for (const auto& [conv_name, want] : cases.items()) {
      ++num_cases;
      if (!tpl.ok()) continue;
      const Json& conv = conversations["conversations"][conv_name];
      ChatRenderInput input;
      input.messages_json = conv["messages"].dump();
      input.tools_json = conv.contains("tools") ? conv["tools"].dump() : "";
      input.add_generation_prompt = conv.value("add_generation_prompt", true);
      input.bos_token = conversations["bos_token"];
      input.eos_token = conversations["eos_token"];
      auto got = tpl->render(input);
      if (want.contains("error")) {
        const std::string message = want["error"];
        const bool ok = !got.ok() && got.error().message.find(message) != std::string::npos;
        EXPECT_TRUE(ok) << name << " x " << conv_name << ": want error '" << message << "', got "
                        << (got.ok() ? "output:\n" + *got : "error '" + got.error().message + "'");
        num_passed += ok;
      } else {
        const std::string output = want["output"];
        const bool ok = got.ok() && *got == output;
        EXPECT_TRUE(ok) << name << " x " << conv_name << ": "
                        << (got.ok() ? "output differs:\n--- got\n" + *got + "\n--- want\n" + output
                                     : "error '" + got.error().message + "'");
        num_passed += ok;
      }
    }
  }
  jinja::set_strftime_now_for_testing(std::nullopt);
  std::printf("template fixtures: %d / %d template x conversation cases pass\n", num_passed,
              num_cases);
}

}  // namespace
}  // namespace lm
