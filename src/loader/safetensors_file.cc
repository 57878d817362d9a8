#include "loader/safetensors_file.h"

#include <nlohmann/json.hpp>
#include <set>

#include "base/byte_reader.h"

namespace lm {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // the format's own limit

std::optional<DType> dtype_from_name(const std::string& name) {
  if (name == "F32") return DType::kF32;
  if (name == "F16") return DType::kF16;
  if (name == "BF16") return DType::kBF16;
  // The integer tensors of pre-quantized checkpoints (packed weights, zero-points, g_idx, shapes).
  if (name == "I32") return DType::kI32;
  if (name == "I8") return DType::kI8;
  if (name == "I64") return DType::kI64;
  // FP8 checkpoints' weights (dequantized at load: loader/fp8_linear.h).
  if (name == "F8_E4M3") return DType::kF8_E4M3;
  if (name == "F8_E5M2") return DType::kF8_E5M2;
  return std::nullopt;
}

}  // namespace

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  LM_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path));
  LM_ASSIGN_OR_RETURN(SafetensorsFile st, parse(file.bytes(), path));
  st.file_ = std::move(file);  // the mapping's address, and so every tensor view, stays put
  return st;
}

Result<SafetensorsFile> SafetensorsFile::parse(std::span<const uint8_t> bytes,
                                               const std::string& label) {
  SafetensorsFile st;
  st.label_ = label;
  st.bytes_ = bytes;
  auto fail = [&](const std::string& what) { return Error{label + ": " + what}; };
  ByteReader r(bytes);
  auto header_len = r.read<uint64_t>();
  if (!header_len.ok())
    return fail("not a safetensors file (shorter than its 8-byte header length)");
  if (*header_len > kMaxHeaderBytes || *header_len > r.remaining()) {
    return fail("header length " + std::to_string(*header_len) + " exceeds the file");
  }
  const auto* header_begin = reinterpret_cast<const char*>(bytes.data() + 8);
  const uint64_t data_start = 8 + *header_len;
  const uint64_t data_size = bytes.size() - data_start;

  // Duplicate keys are invalid in a safetensors header; nlohmann keeps the last silently, so
  // watch the top-level keys as they are parsed.
  std::set<std::string> seen;
  std::string duplicate;
  nlohmann::json::parser_callback_t on_event = [&](int depth, nlohmann::json::parse_event_t event,
                                                   nlohmann::json& parsed) {
    if (event == nlohmann::json::parse_event_t::key && depth == 1 && parsed.is_string()) {
      if (!seen.insert(parsed.get<std::string>()).second && duplicate.empty()) {
        duplicate = parsed.get<std::string>();
      }
    }
    return true;
  };
  nlohmann::json header = nlohmann::json::parse(header_begin, header_begin + *header_len, on_event,
                                                /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) return fail("header is not a JSON object");
  if (!duplicate.empty()) return fail("duplicate tensor '" + duplicate + "'");

  for (const auto& item : header.items()) {
    // Named, not structured bindings: clang 14 (the fuzzing build) cannot capture those.
    const std::string& name = item.key();
    const nlohmann::json& entry = item.value();
    if (name == "__metadata__") continue;
    auto bad = [&](const std::string& what) { return fail("tensor '" + name + "': " + what); };
    if (!entry.is_object()) return bad("entry is not an object");
    auto dtype_it = entry.find("dtype");
    auto shape_it = entry.find("shape");
    auto offsets_it = entry.find("data_offsets");
    if (dtype_it == entry.end() || !dtype_it->is_string())
      return bad("missing or non-string dtype");
    if (shape_it == entry.end() || !shape_it->is_array()) return bad("missing or non-array shape");
    if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2) {
      return bad("data_offsets must be [begin, end]");
    }
    auto dtype = dtype_from_name(dtype_it->get<std::string>());
    if (!dtype)
      return bad(
          "unsupported dtype " + dtype_it->get<std::string>() +
          " (supported: F32, F16, BF16; I32, I8, I64, F8_E4M3, F8_E5M2 in quantized checkpoints)");
    Shape shape;
    uint64_t elements = 1;
    for (const auto& d : *shape_it) {
      if (!d.is_number_unsigned()) return bad("shape entries must be non-negative integers");
      const auto dim = d.get<uint64_t>();
      if (dim > (uint64_t{1} << 40) || (dim != 0 && elements > (uint64_t{1} << 48) / dim)) {
        return bad("absurd dimension " + std::to_string(dim));
      }
      elements *= dim;
      shape.push_back(static_cast<int64_t>(dim));
    }
    const auto& begin_j = (*offsets_it)[0];
    const auto& end_j = (*offsets_it)[1];
    if (!begin_j.is_number_unsigned() || !end_j.is_number_unsigned()) {
      return bad("data_offsets must be non-negative integers");
    }
    const auto begin = begin_j.get<uint64_t>();
    const auto end = end_j.get<uint64_t>();
    if (begin > end || end > data_size) {
      return bad("data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                 "] lie outside the " + std::to_string(data_size) + " data bytes");
    }
    const uint64_t expected = elements * dtype_info(*dtype).block_bytes;
    if (end - begin != expected) {
      return bad("holds " + std::to_string(end - begin) + " bytes but shape " +
                 shape_string(shape) + " of " + dtype_it->get<std::string>() + " needs " +
                 std::to_string(expected));
    }
    void* data = const_cast<uint8_t*>(bytes.data() + data_start + begin);
    st.tensors_.emplace(name, Tensor{*dtype, std::move(shape), data, Device::kCpu});
  }
  return st;
}

}  // namespace lm
