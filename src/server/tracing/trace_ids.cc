#include "server/tracing/trace_ids.h"

#include <algorithm>
#include <random>

namespace lm {
namespace {

constexpr char kHexDigits[] = "0123456789abcdef";

template <size_t N>
std::string hex(const std::array<uint8_t, N>& bytes) {
  std::string out(2 * N, '0');
  for (size_t i = 0; i < N; ++i) {
    out[2 * i] = kHexDigits[bytes[i] >> 4];
    out[2 * i + 1] = kHexDigits[bytes[i] & 0xf];
  }
  return out;
}

template <size_t N>
bool any_nonzero(const std::array<uint8_t, N>& bytes) {
  return std::any_of(bytes.begin(), bytes.end(), [](uint8_t b) { return b != 0; });
}

// Lowercase hex only: W3C tells receivers to treat uppercase as invalid.
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// Decodes text (2 * N lowercase hex digits) into out; false on any other character.
template <size_t N>
bool decode_hex(std::string_view text, std::array<uint8_t, N>& out) {
  if (text.size() != 2 * N) return false;
  for (size_t i = 0; i < N; ++i) {
    const int hi = hex_value(text[2 * i]);
    const int lo = hex_value(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

// NOTE: ids need to be unique, not secret; a 64-bit Mersenne twister per thread, seeded from
// the OS entropy source, gives that without a system call per span.
std::mt19937_64& id_generator() {
  thread_local std::mt19937_64 generator = [] {
    std::random_device device;
    std::seed_seq seed{device(), device(), device(), device(),
                       device(), device(), device(), device()};
    return std::mt19937_64(seed);
  }();
  return generator;
}

template <size_t N>
void fill_random(std::array<uint8_t, N>& bytes) {
  do {
    for (size_t i = 0; i < N; i += 8) {
      uint64_t word = id_generator()();
      for (size_t j = i; j < std::min(N, i + 8); ++j, word >>= 8) bytes[j] = word & 0xff;
    }
  } while (!any_nonzero(bytes));
}

}  // namespace

bool TraceId::valid() const { return any_nonzero(bytes); }
bool SpanId::valid() const { return any_nonzero(bytes); }

std::string to_hex(const TraceId& id) { return hex(id.bytes); }
std::string to_hex(const SpanId& id) { return hex(id.bytes); }

TraceId random_trace_id() {
  TraceId id;
  fill_random(id.bytes);
  return id;
}

SpanId random_span_id() {
  SpanId id;
  fill_random(id.bytes);
  return id;
}

std::optional<TraceParent> parse_traceparent(std::string_view header) {
  // Optional whitespace around a header value is not part of it.
  while (!header.empty() && (header.front() == ' ' || header.front() == '\t'))
    header.remove_prefix(1);
  while (!header.empty() && (header.back() == ' ' || header.back() == '\t'))
    header.remove_suffix(1);
  // version(2) - trace id(32) - parent id(16) - flags(2)
  constexpr size_t kLength = 55;
  if (header.size() < kLength) return std::nullopt;
  std::array<uint8_t, 1> version{};
  if (!decode_hex(header.substr(0, 2), version) || version[0] == 0xff) return std::nullopt;
  if (header[2] != '-' || header[35] != '-' || header[52] != '-') return std::nullopt;
  // Version 00 has exactly these fields; a later one may add fields after a '-'.
  if (version[0] == 0 ? header.size() != kLength
                      : header.size() > kLength && header[kLength] != '-') {
    return std::nullopt;
  }
  TraceParent parent;
  std::array<uint8_t, 1> flags{};
  if (!decode_hex(header.substr(3, 32), parent.trace_id.bytes) ||
      !decode_hex(header.substr(36, 16), parent.parent_span_id.bytes) ||
      !decode_hex(header.substr(53, 2), flags)) {
    return std::nullopt;
  }
  if (!parent.trace_id.valid() || !parent.parent_span_id.valid()) return std::nullopt;
  parent.flags = flags[0];
  return parent;
}

}  // namespace lm
