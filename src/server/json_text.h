// JSON text exactly as TGI's Rust stack writes it: serde_json string escaping, f32 numbers in
// ryu's shortest form (NaN/inf -> null), and Rust's Display/Debug forms that appear inside
// serde error messages and x-* headers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace lm {

// Appends `"..."` with serde_json's escapes (\" \\ \b \f \n \r \t, other controls as \u00xx;
// nothing else escaped). Invalid UTF-8 is replaced by U+FFFD, as Rust strings cannot hold it.
void append_json_string(std::string& out, std::string_view text);
std::string json_string(std::string_view text);

// An f32 as serde_json serializes it (ryu::Buffer::format: "1.0", "-0.34", "1e-7", "1.5e16"),
// or "null" for NaN and +-inf.
std::string json_f32(float value);

// Rust's `Display` for f64: shortest round-trip digits, never an exponent ("1", "0.0000001").
std::string rust_f64_display(double value);

// Rust's `Debug` for str: quoted, with \" \\ \n \r \t \0 and \u{..} for other control chars.
std::string rust_debug_str(std::string_view text);

}  // namespace lm
