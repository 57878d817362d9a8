// GGUF as hostile input: the header, metadata and tensor infos of one file (GgufFile::parse on
// the input bytes), every typed metadata accessor, every tensor's bytes read in full (ASan checks
// they lie inside the input), and the tokenizer a model would build from the metadata
// (read_gguf_vocab + Tokenizer::from_gguf_vocab) with one encode/decode.
#include <cstdint>
#include <span>
#include <string>

#include "fuzz_input.h"
#include "loader/gguf_file.h"
#include "tokenizer/gguf_vocab_reader.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto gguf = lm::GgufFile::parse(std::span<const uint8_t>(data, size), "fuzz.gguf");
  if (!gguf.ok()) return 0;
  for (const auto& entry : gguf->metadata()) {
    const std::string& key = entry.first;
    (void)gguf->get_string(key);
    (void)gguf->get_int(key);
    (void)gguf->get_float(key);
    (void)gguf->get_bool(key);
    (void)gguf->get_string_array(key);
    (void)gguf->get_number_array(key);
  }
  for (const lm::GgufTensorInfo& info : gguf->tensor_infos()) {
    const lm::Tensor tensor = gguf->tensor(info);
    lm::fuzz::touch(tensor.data, info.num_bytes);
  }
  auto vocab = lm::read_gguf_vocab(*gguf);
  if (!vocab.ok()) return 0;
  auto tokenizer = lm::Tokenizer::from_gguf_vocab(*vocab);
  if (!tokenizer.ok()) return 0;
  const std::vector<int32_t> ids = (*tokenizer)->encode("Hello, world! 123 <s> \xe2\x96\x81x");
  (void)(*tokenizer)->decode(ids, /*skip_special_tokens=*/false);
  return 0;
}
