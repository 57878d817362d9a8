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

// \x, \u and \U escapes take exactly 2, 4 and 8 hex digits; a short or bad one used to throw
// std::invalid_argument out of compile (a crash; found by reading the lexer while writing
// tests/fuzz/chat_template_fuzz.cc).
TEST(ChatTemplateUnit, StringEscapesNeedTheirHexDigits) {
  auto good = render(R"({{ '\x41\u00e9\U0001F600' }})");
  ASSERT_TRUE(good.ok()) << good.error().message;
  EXPECT_EQ(*good, "A\u00e9\U0001F600");
  for (const char* bad :
       {R"({{ '\xZZ' }})", R"({{ '\u12' }})", R"({{ '\x)", R"({{ '\U+0000041' }})"}) {
    auto tpl = ChatTemplate::compile(bad);
    ASSERT_FALSE(tpl.ok()) << bad;
    EXPECT_NE(tpl.error().message.find("truncated"), std::string::npos) << tpl.error().message;
  }
  auto huge = ChatTemplate::compile(R"({{ '\UFFFFFFFF' }})");
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.error().message, "illegal Unicode character");
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

// Found by reading the interpreter while writing tests/fuzz/chat_template_fuzz.cc: 64-bit integer
// edges, float-to-int conversions, and sizes computed by multiplication. Each was undefined
// behaviour, a trap (INT64_MIN // -1), an uncaught C++ exception (std::length_error,
// std::out_of_range) or an unbounded loop; each is now a value jinja2 would give or an error.
TEST(ChatTemplateUnit, IntegerAndSizeEdgesAreErrorsOrValues) {
  const std::string min = "(-9223372036854775807 - 1)";
  const std::vector<std::pair<std::string, std::string>> values = {
      {"{{ " + min + " % -1 }}|{{ 9223372036854775807 % -2 }}|{{ " + min + " % 3 }}", "0|-1|1"},
      {"{{ " + min + " is divisibleby(-1) }}", "True"},
      {"{{ 7 // -1 }}|{{ -7 // 2 }}|{{ -7 % 3 }}", "-7|-4|2"},
      {"{{ (-1) ** 65 }}|{{ 2 ** 62 }}|{{ 1 ** 1000000000000 }}|{{ 0 ** 0 }}",
       "-1|4611686018427387904|1|1"},
      {"{{ '' * 9223372036854775807 }}|{{ [] * 9223372036854775807 }}|{{ 'ab' * 2 }}", "|[]|abab"},
      {"{{ 'abc'[1::9223372036854775807] }}|{{ 'abc'[::-9223372036854775807] }}", "b|c"},
      {"{{ range(9223372036854775800, 9223372036854775807, 5)|list }}",
       "[9223372036854775800, 9223372036854775805]"},
      {"{{ 'nan'|float|int }}|{{ 'x'|int(7) }}|{{ 2.9|int }}", "0|7|2"},
      {"{{ [[1]]|map(attribute='99999999999999999999')|list|length }}", "1"},
  };
  for (const auto& [source, want] : values) {
    auto got = render(source);
    ASSERT_TRUE(got.ok()) << source << ": " << got.error().message;
    EXPECT_EQ(*got, want) << source;
  }
  const std::vector<std::pair<std::string, std::string>> errors = {
      {"{{ 9223372036854775807 + 1 }}", "integer overflow"},
      {"{{ " + min + " - 1 }}", "integer overflow"},
      {"{{ 4294967296 * 4294967296 }}", "integer overflow"},
      {"{{ -" + min + " }}", "integer overflow"},
      {"{{ " + min + " // -1 }}", "integer overflow"},
      {"{{ 2 ** 64 }}", "integer overflow"},
      {"{{ [9223372036854775807, 1]|sum }}", "integer overflow"},
      {"{{ " + min + "|abs }}", "integer overflow"},
      {"{{ '1e300'|float|int }}", "integer overflow"},
      {"{{ 'inf'|float|int }}", "cannot convert float infinity to integer"},
      {"{{ 'abc'[:'1e300'|float] }}", "integer overflow"},
      {"{{ '%d'|format('1e300'|float) }}", "integer overflow"},
      {"{{ 'ab' * 9223372036854775807 }}", "size limit"},
      {"{{ [1, 2] * 9223372036854775807 }}", "list is too long"},
      {"{{ 'x'|indent(9223372036854775807) }}", "size limit"},
      {"{{ [[1]]|tojson(indent=9223372036854775807) }}", "size limit"},
      {"{{ '{99999999999999999999999}'.format(1) }}", "out of range"},
  };
  for (const auto& [source, want] : errors) {
    auto got = render(source);
    ASSERT_FALSE(got.ok()) << source << " rendered " << *got;
    EXPECT_NE(got.error().message.find(want), std::string::npos)
        << source << ": " << got.error().message;
  }
}

// Recursion the evaluator, printing and freeing would do over unbounded depths (found by reading
// the interpreter while writing tests/fuzz/chat_template_fuzz.cc): long left-associative chains
// made trees as deep as the template was long, a loop could wrap a list in itself thousands of
// times, and a namespace could be stored inside itself (a cycle: printed forever, never freed).
TEST(ChatTemplateUnit, ExpressionAndValueDepthsAreBounded) {
  std::string attrs = "{{ a";
  for (int i = 0; i < 3000; ++i) attrs += ".b";
  auto deep_attrs = ChatTemplate::compile(attrs + " }}");
  ASSERT_FALSE(deep_attrs.ok());
  EXPECT_NE(deep_attrs.error().message.find("too deeply nested"), std::string::npos)
      << deep_attrs.error().message;
  std::string sum = "{{ 1";
  for (int i = 0; i < 3000; ++i) sum += " + 1";
  EXPECT_FALSE(ChatTemplate::compile(sum + " }}").ok());
  std::string concat = "{{ 'x'";
  for (int i = 0; i < 300; ++i) concat += " ~ 'x'";
  auto long_chain = render(concat + " }}");
  ASSERT_TRUE(long_chain.ok()) << long_chain.error().message;
  EXPECT_EQ(*long_chain, std::string(301, 'x'));

  auto wrapped = render(
      "{% set ns = namespace(x=1) %}{% for i in range(5000) %}{% set ns.x = [ns.x] %}"
      "{% endfor %}{{ ns.x }}");
  ASSERT_FALSE(wrapped.ok());
  EXPECT_NE(wrapped.error().message.find("values nest deeper than 1000"), std::string::npos)
      << wrapped.error().message;
  for (const char* cycle : {"{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}",
                            "{% set ns = namespace() %}{% set ns.l = [1, {'a': [ns]}] %}{{ ns }}",
                            "{% macro m() %}{% set ns.c = caller %}{% endmacro %}"
                            "{% set ns = namespace() %}{% call m() %}x{% endcall %}"}) {
    auto got = render(cycle);
    ASSERT_FALSE(got.ok()) << cycle;
    EXPECT_NE(got.error().message.find("cannot hold a namespace or a function"), std::string::npos)
        << got.error().message;
  }
  auto grows = render(
      "{% set ns = namespace(a=[], d={}) %}{% for m in messages %}{% set ns.a = ns.a + [m] %}"
      "{% endfor %}{% set ns.d = {'n': ns.a|length} %}{{ ns.a|map(attribute='role')|join(',') }} "
      "{{ ns.d.n }}");
  ASSERT_TRUE(grows.ok()) << grows.error().message;
  EXPECT_EQ(*grows, "user,assistant 2");
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
