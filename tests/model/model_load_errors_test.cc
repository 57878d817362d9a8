// Loading refuses malformed checkpoints with one clear error: missing tensors, wrong shapes,
// mis-typed config.json. Each case edits one thing in a copy of a generated tiny checkpoint.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/llama_model.h"

namespace lm {
namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;

const fs::path kSource = fs::path(LM_BUILD_ROOT) / "test-models/llama_mha_untied";

class BrokenCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("lm_broken_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::copy_file(kSource / "config.json", dir_ / "config.json");
    std::ifstream in(kSource / "model.safetensors", std::ios::binary);
    bytes_.assign(std::istreambuf_iterator<char>(in), {});
    uint64_t header_len = 0;
    std::memcpy(&header_len, bytes_.data(), 8);
    header_ = Json::parse(bytes_.begin() + 8, bytes_.begin() + 8 + static_cast<long>(header_len));
    data_.assign(bytes_.begin() + 8 + static_cast<long>(header_len), bytes_.end());
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes model.safetensors from the (edited) header and the original data.
  std::string load_error() {
    const std::string header = header_.dump();
    std::ofstream out(dir_ / "model.safetensors", std::ios::binary);
    const uint64_t len = header.size();
    out.write(reinterpret_cast<const char*>(&len), 8);
    out << header;
    out.write(data_.data(), static_cast<std::streamsize>(data_.size()));
    out.close();
    auto model = LlamaModel::load(dir_.string());
    return model.ok() ? "" : model.error().message;
  }

  void edit_config(const char* key, Json value) {
    Json config = Json::parse(std::ifstream(dir_ / "config.json"));
    config[key] = std::move(value);
    std::ofstream(dir_ / "config.json") << config.dump();
  }

  fs::path dir_;
  std::string bytes_;
  Json header_;
  std::string data_;
};

TEST_F(BrokenCheckpoint, UnchangedCopyLoads) { EXPECT_EQ(load_error(), ""); }

TEST_F(BrokenCheckpoint, MissingTensor) {
  header_.erase("model.layers.1.mlp.up_proj.weight");
  EXPECT_NE(load_error().find("tensor 'model.layers.1.mlp.up_proj.weight' is missing"),
            std::string::npos);
}

TEST_F(BrokenCheckpoint, WrongShape) {
  auto& entry = header_["model.layers.0.mlp.gate_proj.weight"];
  const auto rows = entry["shape"][0].get<int64_t>(), cols = entry["shape"][1].get<int64_t>();
  entry["shape"] = {cols, rows};
  const std::string error = load_error();
  EXPECT_NE(error.find("gate_proj.weight' has shape"), std::string::npos) << error;
  EXPECT_NE(error.find("expected"), std::string::npos);
}

TEST_F(BrokenCheckpoint, ConfigDisagreesWithWeights) {
  edit_config("num_hidden_layers", 3);
  EXPECT_NE(load_error().find("model.layers.2."), std::string::npos);
}

TEST_F(BrokenCheckpoint, ConfigWithWrongTypes) {
  edit_config("num_attention_heads", "four");
  EXPECT_NE(load_error().find("config.json: field 'num_attention_heads' should be an integer"),
            std::string::npos);
}

TEST_F(BrokenCheckpoint, UnsupportedArchitecture) {
  edit_config("architectures", Json{"FalconForCausalLM"});
  EXPECT_NE(load_error().find("unsupported architecture 'FalconForCausalLM'"), std::string::npos);
}

TEST(ModelLoad, MissingPath) {
  auto model = LlamaModel::load("/nonexistent/model.gguf");
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.error().message.find("/nonexistent/model.gguf"), std::string::npos);
}

}  // namespace
}  // namespace lm
