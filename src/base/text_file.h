// Whole-file reads for small text files (config.json, tokenizer.json), with a size cap so a
// hostile or mistaken path cannot make us allocate gigabytes; and their atomic writes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace lm {

Result<std::string> read_text_file(const std::string& path, uint64_t max_bytes = 256ull << 20);
bool file_exists(const std::string& path);

// Writes `text` to `tmp_path` (default `<path>.tmp`), syncs it to disk, then renames it over
// `path`: a reader, or a start after a crash or kill, finds the old file or the whole new one,
// never a torn or empty one. On failure the temporary is removed and the error names the file.
Status write_text_file_atomically(const std::string& path, std::string_view text,
                                  const std::string& tmp_path = "");

}  // namespace lm
