// Whole-file reads for small text files (config.json, tokenizer.json), with a size cap so a
// hostile or mistaken path cannot make us allocate gigabytes.
#pragma once

#include <cstdint>
#include <string>

#include "base/result.h"

namespace lm {

Result<std::string> read_text_file(const std::string& path, uint64_t max_bytes = 256ull << 20);
bool file_exists(const std::string& path);

}  // namespace lm
