// The three reference tokenizers (SmolLM2, Llama-2-style SentencePiece, Llama-3-style byte-level),
// each loaded from tokenizer.json and from GGUF metadata, against HF `tokenizers` outputs on the
// committed corpus (tests/fixtures/tokenizer, made by make_tokenizer_references.py; byte offsets
// by make_tokenize_offsets_references.py), plus the streaming decoder against full decodes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/text_file.h"
#include "base/utf8.h"
#include "loader/gguf_file.h"
#include "tokenizer/gguf_vocab_reader.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace lm {
namespace {

using Json = nlohmann::json;
using Ids = std::vector<int32_t>;

Json load_fixture(const std::string& name) {
  auto text = read_text_file(std::string(LM_REPO_ROOT) + "/tests/fixtures/tokenizer/" + name);
  EXPECT_TRUE(text.ok()) << text.error().message;
  return text.ok() ? Json::parse(*text) : Json();
}

struct Case {
  std::string name;  // fixture and tokenizers/<name> directory
  std::string gguf;  // relative to the repo root
  bool from_gguf;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name << (c.from_gguf ? " from GGUF" : " from tokenizer.json");
}

std::string case_name(const testing::TestParamInfo<Case>& info) {
  std::string name = info.param.name + (info.param.from_gguf ? "_gguf" : "_json");
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  return name;
}

class CorpusTest : public testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    const Case& c = GetParam();
    if (c.from_gguf) {
      auto file = GgufFile::open(std::string(LM_REPO_ROOT) + "/" + c.gguf);
      ASSERT_TRUE(file.ok()) << file.error().message;
      auto vocab = read_gguf_vocab(*file);
      ASSERT_TRUE(vocab.ok()) << vocab.error().message;
      auto tok = Tokenizer::from_gguf_vocab(*vocab);
      ASSERT_TRUE(tok.ok()) << tok.error().message;
      tokenizer_ = std::move(tok).value();
    } else {
      const std::string dir = std::string(LM_BUILD_ROOT) + "/test-models/tokenizers/" + c.name;
      ASSERT_TRUE(file_exists(dir + "/tokenizer.json"))
          << dir << "/tokenizer.json is missing: run `make fixtures-test`";
      auto tok =
          Tokenizer::from_tokenizer_json(dir + "/tokenizer.json", dir + "/tokenizer_config.json");
      ASSERT_TRUE(tok.ok()) << tok.error().message;
      tokenizer_ = std::move(tok).value();
    }
    corpus_ = load_fixture("corpus.json").get<std::vector<std::string>>();
    ref_ = load_fixture(c.name + ".json");
    ASSERT_GE(corpus_.size(), 500u);
  }

  std::unique_ptr<Tokenizer> tokenizer_;
  std::vector<std::string> corpus_;
  Json ref_;
};

// Counts agreements and reports the first few differences.
class Tally {
 public:
  explicit Tally(std::string what) : what_(std::move(what)) {}
  template <typename T>
  void check(const T& got, const T& expected, const std::string& input) {
    ++total_;
    if (got == expected) {
      ++passed_;
    } else if (++shown_ <= 5) {
      ADD_FAILURE() << what_ << " differs for input " << testing::PrintToString(input)
                    << "\n  got:      " << testing::PrintToString(got)
                    << "\n  expected: " << testing::PrintToString(expected);
    }
  }
  ~Tally() {
    std::printf("[ corpus   ] %s: %zu/%zu agree with HF tokenizers\n", what_.c_str(), passed_,
                total_);
    EXPECT_EQ(passed_, total_) << what_;
  }

 private:
  std::string what_;
  size_t total_ = 0, passed_ = 0, shown_ = 0;
};

std::string label(const Case& c, const char* what) {
  return c.name + (c.from_gguf ? " (GGUF) " : " (tokenizer.json) ") + what;
}

TEST_P(CorpusTest, EncodeMatchesHf) {
  Tally with(label(GetParam(), "encode(add_special_tokens=true)"));
  Tally without(label(GetParam(), "encode(add_special_tokens=false)"));
  for (size_t i = 0; i < corpus_.size(); ++i) {
    with.check(tokenizer_->encode(corpus_[i], true), ref_["encode"][i].get<Ids>(), corpus_[i]);
    without.check(tokenizer_->encode(corpus_[i], false), ref_["encode_no_special"][i].get<Ids>(),
                  corpus_[i]);
  }
}

// TGI's /tokenize offsets: HF's byte offsets of encode(add_special_tokens=true), widened to whole
// characters where byte-level tokens split one (offsets.json, make_tokenize_offsets_references.py).
TEST_P(CorpusTest, OffsetsMatchHf) {
  const Json offsets = load_fixture("offsets.json")[GetParam().name];
  ASSERT_EQ(offsets.size(), corpus_.size());
  Tally tally(label(GetParam(), "byte offsets of encode(add_special_tokens=true)"));
  for (size_t i = 0; i < corpus_.size(); ++i) {
    const Ids ids = tokenizer_->encode(corpus_[i], true);
    std::vector<size_t> flat;
    for (const Tokenizer::TextRange& r : tokenizer_->offsets(corpus_[i], ids, true)) {
      flat.push_back(r.begin);
      flat.push_back(r.end);
    }
    tally.check(flat, offsets[i].get<std::vector<size_t>>(), corpus_[i]);
  }
}

TEST_P(CorpusTest, DecodeMatchesHf) {
  Tally keep(label(GetParam(), "decode(skip_special_tokens=false)"));
  Tally skip(label(GetParam(), "decode(skip_special_tokens=true)"));
  for (size_t i = 0; i < corpus_.size(); ++i) {
    const Ids ids = ref_["encode"][i].get<Ids>();
    keep.check(tokenizer_->decode(ids, false), ref_["decode"][i].get<std::string>(), corpus_[i]);
    skip.check(tokenizer_->decode(ids, true), ref_["decode_skip_special"][i].get<std::string>(),
               corpus_[i]);
  }
  Tally random(label(GetParam(), "decode of random id sequences"));
  for (const Json& c : ref_["decode_cases"]) {
    const Ids ids = c["ids"].get<Ids>();
    const std::string shown = testing::PrintToString(ids);
    random.check(tokenizer_->decode(ids, false), c["text"].get<std::string>(), shown);
    random.check(tokenizer_->decode(ids, true), c["text_skip"].get<std::string>(), shown);
  }
}

TEST_P(CorpusTest, StreamDecoderEqualsFullDecode) {
  Tally stream(label(GetParam(), "StreamDecoder concatenation"));
  std::vector<Ids> sequences;
  for (const Json& ids : ref_["encode"]) sequences.push_back(ids.get<Ids>());
  for (const Json& c : ref_["decode_cases"]) sequences.push_back(c["ids"].get<Ids>());
  for (const Ids& ids : sequences) {
    StreamDecoder decoder(*tokenizer_);
    std::string text;
    for (int32_t id : ids) {
      const std::string piece = decoder.push(id);
      // Never a partial character: each piece is valid UTF-8 and does not end in a held-back
      // U+FFFD.
      EXPECT_TRUE(is_valid_utf8(piece));
      EXPECT_FALSE(piece.size() >= 3 && piece.compare(piece.size() - 3, 3, "\xEF\xBF\xBD") == 0);
      text += piece;
    }
    text += decoder.flush();
    stream.check(text, tokenizer_->decode(ids, false), testing::PrintToString(ids));
  }
}

TEST_P(CorpusTest, StreamDecoderWithPromptContext) {
  // Generated ids after a prompt: the emitted text equals decode(prompt + generated) minus
  // decode(prompt) whenever the prompt decodes to a prefix of the whole.
  size_t checked = 0;
  for (size_t i = 0; i < corpus_.size(); ++i) {
    const Ids ids = ref_["encode"][i].get<Ids>();
    if (ids.size() < 4) continue;
    const size_t split = ids.size() / 2;
    const std::string prompt_text =
        tokenizer_->decode(std::span<const int32_t>(ids).first(split), false);
    const std::string full = tokenizer_->decode(ids, false);
    if (full.compare(0, prompt_text.size(), prompt_text) != 0 ||
        prompt_text.find("\xEF\xBF\xBD") != std::string::npos) {
      continue;
    }
    StreamDecoder decoder(*tokenizer_, std::span<const int32_t>(ids).first(split));
    std::string text;
    for (size_t j = split; j < ids.size(); ++j) text += decoder.push(ids[j]);
    text += decoder.flush();
    EXPECT_EQ(text, full.substr(prompt_text.size())) << corpus_[i];
    ++checked;
  }
  EXPECT_GT(checked, 100u);
}

TEST_P(CorpusTest, ConcurrentEncodeIsConsistent) {
  const size_t n = std::min<size_t>(corpus_.size(), 200);
  std::vector<Ids> expected;
  for (size_t i = 0; i < n; ++i) expected.push_back(tokenizer_->encode(corpus_[i]));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = t; i < n * 2; ++i) {
        if (tokenizer_->encode(corpus_[i % n]) != expected[i % n]) ++mismatches[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int m : mismatches) EXPECT_EQ(m, 0);
}

TEST_P(CorpusTest, ArbitraryBytesAndIdsAreSafe) {
  std::mt19937 rng(1234);
  for (int i = 0; i < 300; ++i) {
    std::string bytes(rng() % 64, '\0');
    for (char& c : bytes) c = static_cast<char>(rng() % 256);
    const Ids ids = tokenizer_->encode(bytes);
    for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tokenizer_->vocab_size());
    // Invalid UTF-8 is read as U+FFFD, so the ids are those of the repaired text.
    EXPECT_EQ(ids, tokenizer_->encode(utf8_lossy(bytes)));
    // Offsets of invalid text, or of ids that are not its encoding, stay inside it.
    for (const Ids& some : {ids, Ids{1, 2, 3}}) {
      for (const Tokenizer::TextRange& r : tokenizer_->offsets(bytes, some, true))
        ASSERT_TRUE(r.begin <= r.end && r.end <= bytes.size());
    }
    Ids random_ids(rng() % 16);
    for (int32_t& id : random_ids)
      id = static_cast<int32_t>(rng() % (tokenizer_->vocab_size() + 10)) - 5;
    EXPECT_TRUE(is_valid_utf8(tokenizer_->decode(random_ids, false)));
  }
}

const Case kCases[] = {
    {"smollm2", "models/SmolLM2-135M-Instruct.Q4_1.gguf", false},
    {"smollm2", "models/SmolLM2-135M-Instruct.Q4_1.gguf", true},
    {"llama-spm", "models/vocab/ggml-vocab-llama-spm.gguf", false},
    {"llama-spm", "models/vocab/ggml-vocab-llama-spm.gguf", true},
    {"llama-bpe", "models/vocab/ggml-vocab-llama-bpe.gguf", false},
    {"llama-bpe", "models/vocab/ggml-vocab-llama-bpe.gguf", true},
};
INSTANTIATE_TEST_SUITE_P(Tokenizers, CorpusTest, testing::ValuesIn(kCases), case_name);

// Properties of the loaded tokenizers that the server relies on.
TEST(TokenizerMetadata, SmolLm2SpecialTokensAndTemplate) {
  auto file = GgufFile::open(std::string(LM_REPO_ROOT) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf");
  ASSERT_TRUE(file.ok()) << file.error().message;
  auto vocab = read_gguf_vocab(*file);
  ASSERT_TRUE(vocab.ok()) << vocab.error().message;
  auto tok = Tokenizer::from_gguf_vocab(*vocab);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ((*tok)->vocab_size(), 49152);
  EXPECT_EQ((*tok)->bos_id(), 1);
  EXPECT_EQ((*tok)->eos_id(), 2);
  EXPECT_TRUE((*tok)->is_special(2));
  EXPECT_FALSE((*tok)->is_special(100));
  EXPECT_EQ((*tok)->token_text(2), "<|im_end|>");
  EXPECT_EQ((*tok)->token_to_id("<|im_start|>"), 1);
  EXPECT_NE((*tok)->chat_template().find("<|im_start|>"), std::string::npos);
  const Ids out_of_range = {-5, 1, 49152, 1000000, 2};
  EXPECT_EQ((*tok)->decode(out_of_range, false), "<|im_start|><|im_end|>");
}

}  // namespace
}  // namespace lm
