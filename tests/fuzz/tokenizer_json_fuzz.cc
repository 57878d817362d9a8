// tokenizer.json (and tokenizer_config.json) as hostile input: the input is
// tokenizer.json NUL tokenizer_config.json NUL text. Whatever loads must then encode the text
// (with and without special tokens), decode the ids, stream-decode them one at a time and report
// every id's text and bytes without failing.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_input.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string_view> parts = lm::fuzz::split_parts(data, size, 3);
  const std::string_view config = parts.size() > 1 ? parts[1] : std::string_view();
  const std::string_view text = parts.size() > 2 ? parts[2] : std::string_view("Hello world");
  auto tokenizer = lm::Tokenizer::from_json_strings(parts[0], config);
  if (!tokenizer.ok()) return 0;
  const lm::Tokenizer& tok = **tokenizer;
  for (bool parse_special : {true, false}) {
    const std::vector<int32_t> ids = tok.encode(text, /*add_special_tokens=*/true, parse_special);
    for (int32_t id : ids) {
      if (id < 0 || id >= tok.vocab_size()) __builtin_trap();  // encode made an unknown id
    }
    (void)tok.decode(ids, /*skip_special_tokens=*/false);
    (void)tok.decode(ids, /*skip_special_tokens=*/true);
    lm::StreamDecoder stream(tok);
    for (int32_t id : ids) (void)stream.push(id);
    (void)stream.flush();
  }
  const int32_t probe = tok.vocab_size() < 64 ? tok.vocab_size() : 64;
  for (int32_t id = -1; id <= probe; ++id) {
    (void)tok.token_text(id);
    (void)tok.token_bytes(id);
    (void)tok.is_special(id);
    (void)tok.is_byte_fallback_token(id);
  }
  return 0;
}
