// Reads the tokenizer.ggml.* metadata of a GGUF file into plain GgufVocab data.
#pragma once

#include "base/result.h"
#include "loader/gguf_file.h"
#include "tokenizer/gguf_vocab.h"

namespace lm {

Result<GgufVocab> read_gguf_vocab(const GgufFile& gguf);

}  // namespace lm
