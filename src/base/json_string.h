// JSON string literals as serde_json writes them (TGI's bodies and our JSON log lines): the escapes
// \" \\ \b \f \n \r \t, other control characters as \u00xx, nothing else escaped; invalid UTF-8
// becomes U+FFFD because a Rust String cannot hold it.
#pragma once

#include <string>
#include <string_view>

namespace lm {

// Appends `"..."` to out.
void append_json_string(std::string& out, std::string_view text);
std::string json_string(std::string_view text);

}  // namespace lm
