#include "hub/file_selection.h"

#include <gtest/gtest.h>

namespace lm::hub {
namespace {

using Names = std::vector<std::string>;

TEST(FileSelection, MetadataFilesThatExist) {
  EXPECT_EQ(metadata_files({"README.md", "tokenizer.model", "config.json", "tokenizer.json",
                            "special_tokens_map.json", ".gitattributes"}),
            (Names{"config.json", "tokenizer.json", "special_tokens_map.json", "tokenizer.model"}));
}

// transformers' raw template files: chat_template.jinja and additional_chat_templates/<name>.jinja.
TEST(FileSelection, ChatTemplateFiles) {
  EXPECT_EQ(
      metadata_files({"config.json", "chat_template.jinja",
                      "additional_chat_templates/tool_use.jinja",
                      "additional_chat_templates/README.md", "additional_chat_templates/a/b.jinja",
                      "other/x.jinja"}),
      (Names{"config.json", "chat_template.jinja", "additional_chat_templates/tool_use.jinja"}));
}

TEST(FileSelection, TgiWeightFilter) {
  EXPECT_TRUE(is_weight_file("model.safetensors", ".safetensors"));
  EXPECT_TRUE(is_weight_file("model-00001-of-00002.safetensors", ".safetensors"));
  EXPECT_FALSE(is_weight_file("training_args.bin", ".bin"));
  EXPECT_FALSE(is_weight_file("optimizer_arguments.safetensors", ".safetensors"));
  EXPECT_FALSE(is_weight_file("args.safetensors", ".safetensors"));
  EXPECT_FALSE(is_weight_file("original/model.safetensors", ".safetensors"));  // top level only
  EXPECT_FALSE(is_weight_file("model.safetensors.index.json", ".safetensors"));
}

TEST(FileSelection, SafetensorsFirst) {
  auto s = select_weight_files({"pytorch_model.bin", "model.safetensors", "training_args.bin"});
  EXPECT_EQ(s.format, WeightFormat::kSafetensors);
  EXPECT_EQ(s.files, Names{"model.safetensors"});
  EXPECT_FALSE(s.index_file);
}

TEST(FileSelection, ShardedWithIndex) {
  auto s = select_weight_files({"model.safetensors.index.json", "model-00002-of-00002.safetensors",
                                "model-00001-of-00002.safetensors", "consolidated.safetensors"});
  EXPECT_EQ(s.format, WeightFormat::kSafetensors);
  EXPECT_EQ(s.index_file, "model.safetensors.index.json");
}

TEST(FileSelection, PytorchOnlyWhenNoSafetensors) {
  auto s =
      select_weight_files({"pytorch_model-00001-of-00002.bin", "pytorch_model-00002-of-00002.bin",
                           "pytorch_model.bin.index.json", "training_args.bin"});
  EXPECT_EQ(s.format, WeightFormat::kPytorch);
  EXPECT_EQ(s.index_file, "pytorch_model.bin.index.json");
  EXPECT_EQ(s.files.size(), 2u);
  EXPECT_EQ(select_weight_files({"config.json", "training_args.bin"}).format, WeightFormat::kNone);
}

TEST(FileSelection, IndexShards) {
  auto shards = index_shard_files(
      R"({"metadata": {"total_size": 10}, "weight_map": {"a": "m-2.safetensors",
          "b": "m-1.safetensors", "c": "m-2.safetensors"}})",
      "model.safetensors.index.json");
  ASSERT_TRUE(shards.ok()) << shards.error().message;
  EXPECT_EQ(*shards, (Names{"m-1.safetensors", "m-2.safetensors"}));
  EXPECT_FALSE(index_shard_files(R"({"weight_map": {"a": "../x.safetensors"}})", "i").ok());
  EXPECT_FALSE(index_shard_files(R"({"weight_map": {}})", "i").ok());
  EXPECT_FALSE(index_shard_files(R"({"weight_map": {"a": 1}})", "i").ok());
  EXPECT_FALSE(index_shard_files("not json", "i").ok());
}

}  // namespace
}  // namespace lm::hub
