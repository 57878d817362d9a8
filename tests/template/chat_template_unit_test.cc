// Hand-written templates covering statements, expressions, filters, methods and whitespace
// control (expected strings from Python jinja2 under transformers' settings), plus error
// reporting, the work/depth/output bounds, and concurrent rendering.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "template/chat_template.h"

namespace lm {
namespace {

const char* kMessages =
    R"([{"role":"user","content":"abcdef"},{"role":"assistant","content":"x"}])";

Result<std::string> render(const std::string& source, const std::string& messages = kMessages) {
  auto tpl = ChatTemplate::compile(source);
  if (!tpl.ok()) return tpl.error();
  ChatRenderInput input;
  input.messages_json = messages;
  return tpl->render(input);
}

TEST(ChatTemplateUnit, MatchesPythonJinja) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{% for m in messages %}{{ loop.index }}/{{ loop.length }}:{{ m.role|upper }}{% if not "
       "loop.last %}, {% endif %}{% endfor %}",
       "1/2:USER, 2/2:ASSISTANT"},
      {"{{ messages[0].content[::-1] }}|{{ messages[0]['content'][1:3] }}|{{ 'é😀x'|length }}|{{ "
       "'é😀x'[1] }}",
       "fedcba|bc|3|😀"},
      {"{{ {'b': 1, 'a': [1.5, none, true]}|tojson }}|{{ {'b': 1, 'a': 'é'}|tojson(indent=2, "
       "sort_keys=true) }}|{{ 'é'|tojson(ensure_ascii=true) }}",
       "{\"b\": 1, \"a\": [1.5, null, true]}|{\n  \"a\": \"é\",\n  \"b\": 1\n}|\"\\u00e9\""},
      {"{% set ns = namespace(n=0) %}{% for i in range(5) %}{% if i == 3 %}{% break %}{% endif "
       "%}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}",
       "3"},
      {"{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('a') }} "
       "{{ greet('b', punct='?') }}",
       "Hi a! Hi b?"},
      {"{{ 'a,b,,c'.split(',') }}|{{ '  x  '.strip() }}|{{ 'abc'.startswith(('x','a')) }}|{{ "
       "'Hello World'.replace('o', '0', 1) }}|{{ 7 // 2 }}|{{ -7 % 3 }}|{{ 1 / 4 }}|{{ 2 ** 8 }}",
       "['a', 'b', '', 'c']|x|True|Hell0 World|3|2|0.25|256"},
      {"{{ [3, 1, 2]|sort|join('-') }}|{{ messages|map(attribute='role')|join(',') }}|{{ "
       "messages|selectattr('role', 'equalto', 'user')|list|length }}|{{ none is none }}|{{ x is "
       "defined }}|{{ 1 if false }}|{{ 'yes' if true else 'no' }}",
       "1-2-3|user,assistant|1|True|False||yes"},
      {"  {% if true %}\n    kept\n  {% endif %}\n{#- comment -#}  done", "    kept\ndone"},
  };
  for (const auto& [source, want] : cases) {
    auto got = render(source);
    ASSERT_TRUE(got.ok()) << source << ": " << got.error().message;
    EXPECT_EQ(*got, want) << source;
  }
}

TEST(ChatTemplateUnit, SyntaxErrorsFailCompile) {
  EXPECT_FALSE(ChatTemplate::compile("{% if x %}no end").ok());
  EXPECT_FALSE(ChatTemplate::compile("{{ 1 + }}").ok());
  EXPECT_FALSE(ChatTemplate::compile("{% frobnicate %}").ok());
  EXPECT_FALSE(ChatTemplate::compile("{{ 'unterminated }}").ok());
}

TEST(ChatTemplateUnit, RuntimeErrorsCarryJinjaMessages) {
  auto raised = render("{{ raise_exception('Conversation roles must alternate') }}");
  ASSERT_FALSE(raised.ok());
  EXPECT_EQ(raised.error().message, "Conversation roles must alternate");
  auto concat = render("{{ 'a' + messages }}");
  ASSERT_FALSE(concat.ok());
  EXPECT_EQ(concat.error().message, "can only concatenate str (not \"list\") to str");
  auto undefined = render("{{ nothing.attr }}");
  ASSERT_FALSE(undefined.ok());
  EXPECT_EQ(undefined.error().message, "'nothing' is undefined");
  auto unsafe = render("{{ messages.append(1) }}");
  ASSERT_FALSE(unsafe.ok());
  EXPECT_EQ(unsafe.error().message, "access to attribute 'append' of 'list' object is unsafe.");
  EXPECT_FALSE(render("{{ 1 }}", "not json").ok());
}

TEST(ChatTemplateUnit, HostileTemplatesAreBounded) {
  // Nested loops: 10^15 iterations would never finish; the work limit stops them.
  auto loops = render(
      "{% for a in range(100000) %}{% for b in range(100000) %}{% for c in range(100000) %}"
      "{% endfor %}{% endfor %}{% endfor %}");
  ASSERT_FALSE(loops.ok());
  auto recursion = render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  ASSERT_FALSE(recursion.ok());
  EXPECT_NE(recursion.error().message.find("recursion"), std::string::npos);
  // Doubling a string 40 times would be a terabyte.
  auto doubling = render(
      "{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(40) %}{% set ns.s = ns.s + "
      "ns.s %}"
      "{% endfor %}{{ ns.s|length }}");
  ASSERT_FALSE(doubling.ok());
  auto repeat = render("{{ 'x' * 10000000000 }}");
  ASSERT_FALSE(repeat.ok());
  EXPECT_FALSE(ChatTemplate::compile("{{ " + std::string(100000, '(') + "1 }}").ok());
  EXPECT_FALSE(ChatTemplate::compile("{{ " + std::string(300000, '-') + "1 }}").ok());
}

TEST(ChatTemplateUnit, ToolsAndExtraContext) {
  auto tpl = ChatTemplate::compile(
      "{{ bos_token }}{% if tools is not none %}{{ tools|tojson }}{% endif %}{{ flag }}"
      "{% if add_generation_prompt %}>{% endif %}{{ eos_token }}");
  ASSERT_TRUE(tpl.ok());
  ChatRenderInput input;
  input.messages_json = "[]";
  input.tools_json = R"([{"type":"function","function":{"name":"f"}}])";
  input.bos_token = "<s>";
  input.eos_token = "</s>";
  input.extra_context_json = R"({"flag":"on"})";
  auto out = tpl->render(input);
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_EQ(*out, R"(<s>[{"type": "function", "function": {"name": "f"}}]on></s>)");
  input.tools_json.clear();
  input.add_generation_prompt = false;
  out = tpl->render(input);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, "<s>on</s>");
}

TEST(ChatTemplateUnit, RendersConcurrently) {
  auto tpl = ChatTemplate::compile(
      "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{{ m.content }}"
      "{% endfor %}{{ ns.n }}");
  ASSERT_TRUE(tpl.ok());
  const ChatTemplate shared = *tpl;
  std::vector<std::thread> threads;
  std::vector<int> ok(8, 0);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        ChatRenderInput input;
        input.messages_json = R"([{"role":"user","content":"t)" + std::to_string(t) + R"("}])";
        auto out = shared.render(input);
        ok[t] += out.ok() && *out == "t" + std::to_string(t) + "1";
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(ok[t], 200);
}

}  // namespace
}  // namespace lm
