// Hand-built tokenizer.json documents for the unit tests.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace lm::testing_tok {

using Json = nlohmann::json;

// A BPE tokenizer.json whose vocabulary is `tokens` (id = position).
inline Json bpe_json(const std::vector<std::string>& tokens,
                     const std::vector<std::vector<std::string>>& merges) {
  Json vocab = Json::object();
  for (size_t i = 0; i < tokens.size(); ++i) vocab[tokens[i]] = static_cast<int>(i);
  Json j = {{"version", "1.0"},
            {"added_tokens", Json::array()},
            {"normalizer", nullptr},
            {"pre_tokenizer", nullptr},
            {"post_processor", nullptr},
            {"decoder", nullptr},
            {"model",
             {{"type", "BPE"},
              {"unk_token", nullptr},
              {"byte_fallback", false},
              {"fuse_unk", false},
              {"vocab", vocab},
              {"merges", merges}}}};
  return j;
}

inline Json added(int id, const std::string& content, bool special, bool lstrip = false,
                  bool rstrip = false, bool normalized = false) {
  return {{"id", id},         {"content", content},       {"special", special},  {"lstrip", lstrip},
          {"rstrip", rstrip}, {"normalized", normalized}, {"single_word", false}};
}

inline std::unique_ptr<Tokenizer> load(const Json& j, const Json& config = Json()) {
  auto tok = Tokenizer::from_json_strings(j.dump(), config.is_null() ? "" : config.dump());
  if (!tok.ok()) {
    ADD_FAILURE() << tok.error().message;
    return nullptr;
  }
  return std::move(tok).value();
}

// The 256 tokens of the GPT-2 byte alphabet, in byte order.
inline std::vector<std::string> byte_alphabet() {
  std::vector<std::string> out;
  std::string printable;
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool keep = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    const int cp = keep ? b : next++;
    std::string s;
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    out.push_back(s);
  }
  return out;
}

}  // namespace lm::testing_tok
