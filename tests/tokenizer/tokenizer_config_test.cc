// The chat templates a model folder's tokenizer_config.json and chat_template.json give, picked
// as transformers picks them: a named list gives "default" for chat and "tool_use" for requests
// with tools; chat_template.json (a processor's template) replaces the tokenizer config's.
#include "tokenizer/tokenizer_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace lm {
namespace {

namespace fs = std::filesystem;

class ModelDir {
 public:
  ModelDir() {
    static int counter = 0;
    dir_ = fs::temp_directory_path() /
           ("lm_tokcfg_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(dir_);
  }
  ~ModelDir() { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }
  std::string path() const { return dir_.string(); }

 private:
  fs::path dir_;
};

TokenizerConfig parse(const std::string& json) {
  auto c = parse_tokenizer_config(json, "tokenizer_config.json");
  EXPECT_TRUE(c.ok()) << c.error().message;
  return c.ok() ? *c : TokenizerConfig{};
}

TEST(TokenizerConfig, NamedTemplatesGiveDefaultAndToolUse) {
  const TokenizerConfig c = parse(R"({"chat_template": [
      {"name": "tool_use", "template": "T{{ tools }}"},
      {"name": "default", "template": "D"},
      {"name": "rag", "template": "R"}]})");
  EXPECT_EQ(c.chat_template, "D");
  EXPECT_EQ(c.tool_use_template, "T{{ tools }}");
}

TEST(TokenizerConfig, OneTemplateIsTheDefaultAndNoToolUse) {
  const TokenizerConfig c = parse(R"({"chat_template": "D", "eos_token": "</s>"})");
  EXPECT_EQ(c.chat_template, "D");
  EXPECT_EQ(c.tool_use_template, "");
  EXPECT_EQ(c.eos_token, "</s>");
  // A list without "default": no chat template (transformers refuses to guess).
  EXPECT_EQ(parse(R"({"chat_template": [{"name": "tool_use", "template": "T"}]})").chat_template,
            "");
}

TEST(TokenizerConfig, ChatTemplateJsonReplacesTheConfigsTemplate) {
  ModelDir dir;
  dir.write("tokenizer_config.json",
            R"({"chat_template": [{"name": "default", "template": "OLD"},
                                  {"name": "tool_use", "template": "OLD-T"}],
                "bos_token": "<s>"})");
  dir.write("chat_template.json", R"({"chat_template": "NEW"})");
  auto text = read_model_tokenizer_config(dir.path());
  ASSERT_TRUE(text.ok()) << text.error().message;
  const TokenizerConfig c = parse(*text);
  EXPECT_EQ(c.chat_template, "NEW");
  EXPECT_EQ(c.tool_use_template, "");  // the processor's template replaces the list whole
  EXPECT_EQ(c.bos_token, "<s>");
}

TEST(TokenizerConfig, ChatTemplateJsonAloneOrNeither) {
  ModelDir dir;
  auto none = read_model_tokenizer_config(dir.path());
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, "");
  dir.write("chat_template.json", R"({"chat_template": "ONLY"})");
  auto only = read_model_tokenizer_config(dir.path());
  ASSERT_TRUE(only.ok()) << only.error().message;
  EXPECT_EQ(parse(*only).chat_template, "ONLY");
  // Without chat_template.json the config is read as it is.
  ModelDir plain;
  plain.write("tokenizer_config.json", R"({"chat_template": "C"})");
  EXPECT_EQ(parse(*read_model_tokenizer_config(plain.path())).chat_template, "C");
}

// transformers' raw files (chat_template.jinja, additional_chat_templates/*.jinja) replace every
// template of tokenizer_config.json and chat_template.json; a lone default is a plain string.
TEST(TokenizerConfig, JinjaTemplateFilesReplaceTheOthers) {
  ModelDir dir;
  dir.write("tokenizer_config.json",
            R"({"chat_template": [{"name": "default", "template": "OLD"},
                                  {"name": "tool_use", "template": "OLD-T"}],
                "eos_token": "</s>"})");
  dir.write("chat_template.json", R"({"chat_template": "JSON"})");
  dir.write("chat_template.jinja", "{{ 'JINJA' }}");
  auto text = read_model_tokenizer_config(dir.path());
  ASSERT_TRUE(text.ok()) << text.error().message;
  TokenizerConfig c = parse(*text);
  EXPECT_EQ(c.chat_template, "{{ 'JINJA' }}");
  EXPECT_EQ(c.tool_use_template, "");
  EXPECT_EQ(c.eos_token, "</s>");
  fs::create_directories(fs::path(dir.path()) / "additional_chat_templates");
  dir.write("additional_chat_templates/tool_use.jinja", "{{ tools }}");
  dir.write("additional_chat_templates/notes.txt", "not a template");
  text = read_model_tokenizer_config(dir.path());
  ASSERT_TRUE(text.ok()) << text.error().message;
  c = parse(*text);
  EXPECT_EQ(c.chat_template, "{{ 'JINJA' }}");
  EXPECT_EQ(c.tool_use_template, "{{ tools }}");
}

TEST(TokenizerConfig, AMalformedChatTemplateJsonIsNamed) {
  ModelDir dir;
  dir.write("chat_template.json", R"({"template": "x"})");
  auto r = read_model_tokenizer_config(dir.path());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message,
            dir.path() + "/chat_template.json must hold {\"chat_template\": \"...\"}");
}

}  // namespace
}  // namespace lm
