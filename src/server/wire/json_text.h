// JSON text exactly as TGI's Rust stack writes it: serde_json string escaping (base/json_string.h),
// f32 numbers in ryu's shortest form (NaN/inf -> null), and Rust's Display/Debug forms that appear
// inside serde error messages and x-* headers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/json_string.h"

namespace lm {

// An f32 as serde_json serializes it (ryu::Buffer::format: "1.0", "-0.34", "1e-7", "1.5e16"),
// or "null" for NaN and +-inf.
std::string json_f32(float value);

// Rust's `Display` for f64: shortest round-trip digits, never an exponent ("1", "0.0000001").
std::string rust_f64_display(double value);

// Rust's `Debug` for str: quoted, with \" \\ \n \r \t \0 and \u{..} for other control chars.
std::string rust_debug_str(std::string_view text);

}  // namespace lm
