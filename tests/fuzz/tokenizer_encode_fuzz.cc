// Encode/decode of fuzzed text by real vocabularies (llama.cpp's vocab-only GGUFs under
// models/vocab/: Llama 3's, GPT-2's and Qwen2's byte-level BPE, Llama 2's SentencePiece). The
// first input byte picks the tokenizer and the flags, the rest is the text. Oracles: every id is
// in the vocabulary; for Llama 3 and GPT-2, valid UTF-8 text round-trips exactly
// (decode(encode(text)) == text, special-token text read as plain text) and streaming decode
// equals one-shot decode.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/utf8.h"
#include "loader/gguf_file.h"
#include "tokenizer/gguf_vocab_reader.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace {

struct Vocab {
  const char* file;
  bool byte_level;
  std::unique_ptr<lm::Tokenizer> tokenizer;
};

std::vector<Vocab>& vocabs() {
  static std::vector<Vocab> all = [] {
    std::vector<Vocab> v;
    // Round-trip oracle only where nothing rewrites the text: Qwen2 normalizes to NFC, and
    // SentencePiece adds a prefix space and turns spaces into U+2581.
    v.push_back({"ggml-vocab-llama-bpe.gguf", true, nullptr});
    v.push_back({"ggml-vocab-gpt-2.gguf", true, nullptr});
    v.push_back({"ggml-vocab-qwen2.gguf", false, nullptr});
    v.push_back({"ggml-vocab-llama-spm.gguf", false, nullptr});
    for (Vocab& vocab : v) {
      const std::string path = std::string(LM_REPO_ROOT) + "/models/vocab/" + vocab.file;
      auto gguf = lm::GgufFile::open(path);
      auto parsed =
          gguf.ok() ? lm::read_gguf_vocab(*gguf) : lm::Result<lm::GgufVocab>(gguf.error());
      auto tok = parsed.ok() ? lm::Tokenizer::from_gguf_vocab(*parsed)
                             : lm::Result<std::unique_ptr<lm::Tokenizer>>(parsed.error());
      if (!tok.ok()) {
        std::fprintf(stderr, "tokenizer_encode_fuzz: %s (run scripts/fetch_models.sh)\n",
                     tok.error().message.c_str());
        std::abort();
      }
      vocab.tokenizer = std::move(tok).value();
    }
    return v;
  }();
  return all;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  vocabs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  Vocab& vocab = vocabs()[flags % vocabs().size()];
  const lm::Tokenizer& tok = *vocab.tokenizer;
  const bool add_special = flags & 0x10;
  const bool parse_special = flags & 0x20;
  std::vector<int32_t> ids;
  if (flags & 0x40) {
    // Special tokens protected inside one range: [text.size() / 4, text.size() / 2).
    const lm::Tokenizer::TextRange range{text.size() / 4, text.size() / 2};
    ids = tok.encode(text, add_special, std::span(&range, 1));
  } else {
    ids = tok.encode(text, add_special, parse_special);
  }
  for (int32_t id : ids) {
    if (id < 0 || id >= tok.vocab_size()) __builtin_trap();
  }
  const std::string decoded = tok.decode(ids, /*skip_special_tokens=*/flags & 0x80);
  if (!vocab.byte_level || !lm::is_valid_utf8(text)) return 0;

  const std::vector<int32_t> plain = tok.encode(text, /*add_special_tokens=*/false,
                                                /*parse_special_tokens=*/false);
  const std::string round_trip = tok.decode(plain, /*skip_special_tokens=*/false);
  if (round_trip != text) {
    std::fprintf(stderr, "round trip of %zu bytes gave %zu bytes\n", text.size(),
                 round_trip.size());
    __builtin_trap();
  }
  lm::StreamDecoder stream(tok);
  std::string streamed;
  for (int32_t id : plain) streamed += stream.push(id);
  streamed += stream.flush();
  if (streamed != round_trip) {
    std::fprintf(stderr, "streamed decode differs from decode (%zu vs %zu bytes)\n",
                 streamed.size(), round_trip.size());
    __builtin_trap();
  }
  return 0;
}
