// A pull reader over a JSON request body that fails the way TGI's stack does (axum 0.7 Json ->
// serde_path_to_error -> serde_json): same messages, same "at line L column C" positions, same
// "path: " prefixes, and the syntax-vs-data split that decides 400 vs 422.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lm {

enum class SerdeErrorKind {
  kSyntax,  // malformed JSON, EOF included (axum: 400 "Failed to parse ...")
  kData,    // well-formed JSON of the wrong shape (axum: 422 "Failed to deserialize ...")
};

struct SerdeError {
  SerdeErrorKind kind = SerdeErrorKind::kSyntax;
  std::string message;  // "path: msg at line L column C", as serde_path_to_error displays it
};

// One field of a Rust struct as serde derive sees it (declaration order matters for the
// array form, which serde accepts for structs too).
struct SerdeField {
  std::string_view name;
  bool required = false;  // no #[serde(default)]: absence is "missing field"
};

class SerdeJsonReader {
 public:
  explicit SerdeJsonReader(std::string_view text) : text_(text) {}

  // Deserializes a struct (JSON object, or array in field order). `read_field(i)` must consume
  // the value of field i. Unknown keys are skipped (validated for syntax only). `expecting` is
  // serde's name for the type: "struct GenerateRequest".
  bool read_struct(std::string_view expecting, std::span<const SerdeField> fields,
                   const std::function<bool(size_t)>& read_field);

  // serde's primitive visitors. Each consumes one value.
  bool read_string(std::string& out);
  bool read_bool(bool& out);
  bool read_f32(float& out);
  bool read_i32(int32_t& out);
  bool read_u32(uint32_t& out);
  bool read_u64(uint64_t& out, std::string_view rust_type);  // "u64" or "usize"
  bool read_string_seq(std::vector<std::string>& out);       // Vec<String>
  // Option<T>: consumes `null` and sets is_null, or leaves the value for the caller to read.
  bool read_null(bool& is_null);
  // Skips one value (serde IgnoredAny), capturing its raw text.
  bool read_raw(std::string& raw_json);
  // serde_json::from_str's end(): only whitespace may follow the value.
  bool read_end();
  // A custom data error (serde::de::Error::custom) at the current position.
  bool fail_data(std::string message);

  const SerdeError& error() const { return error_; }

 private:
  struct Number {
    enum Kind { kUnsigned, kSigned, kFloat } kind = kUnsigned;
    uint64_t u = 0;
    int64_t i = 0;
    double f = 0;
  };
  struct Segment {
    enum Kind { kKey, kIndex, kUnknown } kind;
    std::string key;
    size_t index = 0;
  };

  bool at_end() const { return index_ >= text_.size(); }
  char peek() const { return text_[index_]; }
  // Skips whitespace; false at end of input.
  bool skip_whitespace();
  bool fail_at(size_t index, SerdeErrorKind kind, std::string message);
  bool syntax_error(std::string_view code) {
    return fail_at(index_, SerdeErrorKind::kSyntax, std::string(code));
  }
  bool syntax_peek_error(std::string_view code);
  bool invalid_type(std::string_view expected);
  bool invalid_value(const Number& n, std::string_view expected);
  bool parse_ident(std::string_view rest);
  bool parse_string_body(std::string* out, bool validate_utf8);
  bool parse_escape(std::string* out);
  bool parse_number(Number& out, bool compute = true);
  bool read_number(Number& out, std::string_view expected);
  bool ignore_value();
  bool enter_nested();
  void leave_nested() { ++remaining_depth_; }
  // Object/array separators as serde_json's MapAccess/SeqAccess see them: sets `done` at the
  // closing bracket, otherwise positions on the next key/element.
  bool next_key(bool& first, bool& done);
  bool next_element(bool& first, bool& done);
  bool parse_colon();
  bool end_map();
  bool end_seq();
  std::string path_prefix() const;

  std::string_view text_;
  size_t index_ = 0;
  int remaining_depth_ = 128;  // serde_json's recursion limit
  std::vector<Segment> path_;
  SerdeError error_;
  bool failed_ = false;
};

}  // namespace lm
