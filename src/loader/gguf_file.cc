#include "loader/gguf_file.h"

#include <algorithm>
#include <limits>

#include "base/byte_reader.h"
#include "loader/gguf_split.h"

namespace lm {
namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint64_t kMaxMetadataEntries = 1u << 20;
constexpr uint64_t kMaxTensors = 1u << 20;
constexpr uint32_t kMaxDims = 4;
constexpr int kMaxArrayDepth = 2;
constexpr uint64_t kDefaultAlignment = 32;

std::optional<DType> dtype_from_ggml(uint32_t ggml_type) {
  switch (ggml_type) {
    case 0:
      return DType::kF32;
    case 1:
      return DType::kF16;
    case 2:
      return DType::kQ4_0;
    case 3:
      return DType::kQ4_1;
    case 6:
      return DType::kQ5_0;
    case 7:
      return DType::kQ5_1;
    case 8:
      return DType::kQ8_0;
    case 10:
      return DType::kQ2_K;
    case 11:
      return DType::kQ3_K;
    case 12:
      return DType::kQ4_K;
    case 13:
      return DType::kQ5_K;
    case 14:
      return DType::kQ6_K;
    case 20:
      return DType::kIQ4_NL;
    case 23:
      return DType::kIQ4_XS;
    case 30:
      return DType::kBF16;
    default:
      return std::nullopt;
  }
}

// Smallest encoded size of one element of `type`, used to bound array counts by the bytes left.
uint64_t min_encoded_size(GgufValue::Type type) {
  using T = GgufValue::Type;
  switch (type) {
    case T::kU8:
    case T::kI8:
    case T::kBool:
      return 1;
    case T::kU16:
    case T::kI16:
      return 2;
    case T::kU32:
    case T::kI32:
    case T::kF32:
      return 4;
    case T::kU64:
    case T::kI64:
    case T::kF64:
    case T::kString:
      return 8;
    case T::kArray:
      return 12;
  }
  return 1;
}

Result<std::string> read_gguf_string(ByteReader& r) {
  LM_ASSIGN_OR_RETURN(uint64_t length, r.read<uint64_t>());
  return r.read_string(length);
}

Result<GgufValue> read_value(ByteReader& r, uint32_t raw_type, int depth) {
  using T = GgufValue::Type;
  if (raw_type > static_cast<uint32_t>(T::kF64)) {
    return Error{"unknown metadata value type " + std::to_string(raw_type)};
  }
  GgufValue v;
  v.type = static_cast<T>(raw_type);
  switch (v.type) {
    case T::kU8: {
      LM_ASSIGN_OR_RETURN(auto x, r.read<uint8_t>());
      v.value = uint64_t{x};
      break;
    }
    case T::kI8: {
      LM_ASSIGN_OR_RETURN(auto x, r.read<int8_t>());
      v.value = int64_t{x};
      break;
    }
    case T::kU16: {
      LM_ASSIGN_OR_RETURN(auto x, r.read<uint16_t>());
      v.value = uint64_t{x};
      break;
    }
    case T::kI16: {
      LM_ASSIGN_OR_RETURN(auto x, r.read<int16_t>());
      v.value = int64_t{x};
      break;
    }
    case T::kU32: {
      LM_ASSIGN_OR_RETURN(auto x, r.read<uint32_t>());
      v.value = uint64_t{x};
      break;
    }
    case T::kI32: {
      LM_ASSIGN_OR_RETURN(auto x, r.read<int32_t>());
      v.value = int64_t{x};
      break;
    }
    case T::kU64: {
      LM_ASSIGN_OR_RETURN(auto x, r.read<uint64_t>());
      v.value = x;
      break;
    }
    case T::kI64: {
      LM_ASSIGN_OR_RETURN(auto x, r.read<int64_t>());
      v.value = x;
      break;
    }
    case T::kF32: {
      LM_ASSIGN_OR_RETURN(auto x, r.read<float>());
      v.value = double{x};
      break;
    }
    case T::kF64: {
      LM_ASSIGN_OR_RETURN(auto x, r.read<double>());
      v.value = x;
      break;
    }
    case T::kBool: {
      LM_ASSIGN_OR_RETURN(auto x, r.read<uint8_t>());
      if (x > 1) return Error{"invalid bool value " + std::to_string(x)};
      v.value = x == 1;
      break;
    }
    case T::kString: {
      LM_ASSIGN_OR_RETURN(auto s, read_gguf_string(r));
      v.value = std::move(s);
      break;
    }
    case T::kArray: {
      if (depth >= kMaxArrayDepth) return Error{"arrays nested too deeply"};
      LM_ASSIGN_OR_RETURN(uint32_t elem_type, r.read<uint32_t>());
      LM_ASSIGN_OR_RETURN(uint64_t count, r.read<uint64_t>());
      if (elem_type > static_cast<uint32_t>(T::kF64)) {
        return Error{"unknown array element type " + std::to_string(elem_type)};
      }
      if (count > r.remaining() / min_encoded_size(static_cast<T>(elem_type))) {
        return Error{"array of " + std::to_string(count) + " elements exceeds the file"};
      }
      std::vector<GgufValue> items;
      items.reserve(count);
      for (uint64_t i = 0; i < count; ++i) {
        LM_ASSIGN_OR_RETURN(GgufValue item, read_value(r, elem_type, depth + 1));
        items.push_back(std::move(item));
      }
      v.value = std::move(items);
      break;
    }
  }
  return v;
}

}  // namespace

bool GgufValue::is_integer() const {
  return std::holds_alternative<uint64_t>(value) || std::holds_alternative<int64_t>(value);
}

Result<GgufFile> GgufFile::open(const std::string& path) {
  LM_ASSIGN_OR_RETURN(GgufFile first, open_one(path));
  return join_gguf_split(std::move(first));
}

Result<GgufFile> GgufFile::open_one(const std::string& path) {
  LM_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path));
  LM_ASSIGN_OR_RETURN(GgufFile gguf, parse(file.bytes(), path));
  gguf.file_ = std::move(file);  // the mapping's address, and so bytes_, stays put
  return gguf;
}

Result<GgufFile> GgufFile::parse(std::span<const uint8_t> bytes, const std::string& label) {
  GgufFile gguf;
  gguf.label_ = label;
  gguf.bytes_ = bytes;
  ByteReader r(bytes);
  auto fail = [&](const std::string& what) { return gguf.error(what); };
  auto at = [&](const Error& e) { return gguf.error(e.message); };

  auto magic = r.read<uint32_t>();
  if (!magic.ok() || *magic != kGgufMagic) return fail("not a GGUF file (bad magic)");
  auto version = r.read<uint32_t>();
  if (!version.ok()) return at(version.error());
  if (*version != 2 && *version != 3) {
    return fail("unsupported GGUF version " + std::to_string(*version) + " (supported: 2, 3)");
  }
  gguf.version_ = *version;
  auto num_tensors = r.read<uint64_t>();
  auto num_kv = num_tensors.ok() ? r.read<uint64_t>() : Result<uint64_t>(num_tensors.error());
  if (!num_kv.ok()) return at(num_kv.error());
  if (*num_tensors > kMaxTensors)
    return fail("absurd tensor count " + std::to_string(*num_tensors));
  if (*num_kv > kMaxMetadataEntries)
    return fail("absurd metadata count " + std::to_string(*num_kv));

  for (uint64_t i = 0; i < *num_kv; ++i) {
    auto key = read_gguf_string(r);
    if (!key.ok())
      return at(Error{"metadata entry " + std::to_string(i) + ": " + key.error().message});
    auto type = r.read<uint32_t>();
    if (!type.ok()) return at(Error{"metadata '" + *key + "': " + type.error().message});
    auto value = read_value(r, *type, 0);
    if (!value.ok()) return at(Error{"metadata '" + *key + "': " + value.error().message});
    if (!gguf.metadata_.emplace(*key, std::move(*value)).second) {
      return fail("duplicate metadata key '" + *key + "'");
    }
  }

  uint64_t alignment = kDefaultAlignment;
  if (const GgufValue* a = gguf.find("general.alignment")) {
    if (!a->is_integer()) return fail("general.alignment is not an integer");
    const auto* u = std::get_if<uint64_t>(&a->value);
    if (u == nullptr || *u == 0 || (*u & (*u - 1)) != 0 || *u > 4096) {
      return fail("general.alignment must be a power of two up to 4096");
    }
    alignment = *u;
  }

  for (uint64_t i = 0; i < *num_tensors; ++i) {
    GgufTensorInfo info;
    auto name = read_gguf_string(r);
    if (!name.ok())
      return at(Error{"tensor info " + std::to_string(i) + ": " + name.error().message});
    info.name = std::move(*name);
    auto bad = [&](const std::string& what) { return fail("tensor '" + info.name + "': " + what); };
    auto n_dims = r.read<uint32_t>();
    if (!n_dims.ok()) return bad(n_dims.error().message);
    if (*n_dims == 0 || *n_dims > kMaxDims)
      return bad("invalid number of dimensions " + std::to_string(*n_dims));
    uint64_t elements = 1;
    for (uint32_t d = 0; d < *n_dims; ++d) {
      auto dim = r.read<uint64_t>();
      if (!dim.ok()) return bad(dim.error().message);
      if (*dim == 0 || *dim > (uint64_t{1} << 40) || elements > (uint64_t{1} << 48) / *dim) {
        return bad("invalid dimension " + std::to_string(*dim));
      }
      elements *= *dim;
      info.shape.insert(info.shape.begin(), static_cast<int64_t>(*dim));
    }
    auto ggml_type = r.read<uint32_t>();
    if (!ggml_type.ok()) return bad(ggml_type.error().message);
    auto dtype = dtype_from_ggml(*ggml_type);
    if (!dtype) {
      return bad(
          "unsupported tensor type " + std::to_string(*ggml_type) +
          " (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, Q2_K, "
          "Q3_K, IQ4_NL, IQ4_XS)");
    }
    info.dtype = *dtype;
    auto offset = r.read<uint64_t>();
    if (!offset.ok()) return bad(offset.error().message);
    if (*offset % alignment != 0)
      return bad("data offset " + std::to_string(*offset) + " is not aligned");
    info.offset = *offset;  // relative for now
    if (info.shape.back() % dtype_info(info.dtype).block_size != 0) {
      return bad("row length " + std::to_string(info.shape.back()) + " is not a multiple of the " +
                 std::string(dtype_name(info.dtype)) + " block size");
    }
    auto num_bytes = dtype_bytes(info.dtype, elements);
    if (!num_bytes) return bad("size overflows");
    info.num_bytes = *num_bytes;
    if (!gguf.tensor_idx_.emplace(info.name, gguf.tensors_.size()).second) {
      return fail("duplicate tensor '" + info.name + "'");
    }
    gguf.tensors_.push_back(std::move(info));
  }

  const uint64_t data_start = (r.offset() + alignment - 1) / alignment * alignment;
  const uint64_t file_size = bytes.size();
  for (GgufTensorInfo& info : gguf.tensors_) {
    if (info.offset > file_size || data_start > file_size - info.offset ||
        info.num_bytes > file_size - data_start - info.offset) {
      return fail("tensor '" + info.name + "' data (" + std::to_string(info.num_bytes) +
                  " bytes at offset " + std::to_string(info.offset) +
                  ") lies past the end of the file");
    }
    info.offset += data_start;
  }
  // Overlapping tensors are a sign of corruption; catch them here rather than compute garbage.
  std::vector<const GgufTensorInfo*> by_offset;
  for (const auto& t : gguf.tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](auto* a, auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    if (by_offset[i - 1]->offset + by_offset[i - 1]->num_bytes > by_offset[i]->offset) {
      return fail("tensors '" + by_offset[i - 1]->name + "' and '" + by_offset[i]->name +
                  "' overlap");
    }
  }
  return gguf;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  auto it = tensor_idx_.find(name);
  return it == tensor_idx_.end() ? nullptr : &tensors_[it->second];
}

Tensor GgufFile::tensor(const GgufTensorInfo& info) const {
  const uint8_t* data =
      info.shard_idx == 0 ? bytes_.data() : shard_files_.at(info.shard_idx - 1).data();
  return Tensor{info.dtype, info.shape, const_cast<uint8_t*>(data + info.offset), Device::kCpu};
}

void GgufFile::drop_pages(const void* p, size_t bytes) const {
  const auto* byte = static_cast<const uint8_t*>(p);
  for (const MappedFile& shard : shard_files_) {
    if (byte >= shard.data() && byte < shard.data() + shard.size())
      return shard.drop_pages(p, bytes);
  }
  if (file_.data() != nullptr) file_.drop_pages(p, bytes);
}

Result<std::optional<std::string>> GgufFile::get_string(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::optional<std::string>();
  if (const auto* s = std::get_if<std::string>(&v->value)) return std::optional<std::string>(*s);
  return error("metadata '" + key + "' should be a string");
}

Result<std::optional<int64_t>> GgufFile::get_int(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::optional<int64_t>();
  if (const auto* i = std::get_if<int64_t>(&v->value)) return std::optional<int64_t>(*i);
  if (const auto* u = std::get_if<uint64_t>(&v->value)) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return error("metadata '" + key + "' is out of range");
    }
    return std::optional<int64_t>(static_cast<int64_t>(*u));
  }
  return error("metadata '" + key + "' should be an integer");
}

Result<std::optional<double>> GgufFile::get_float(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::optional<double>();
  if (const auto* d = std::get_if<double>(&v->value)) return std::optional<double>(*d);
  if (v->is_integer()) {
    LM_ASSIGN_OR_RETURN(auto i, get_int(key));
    return std::optional<double>(static_cast<double>(*i));
  }
  return error("metadata '" + key + "' should be a number");
}

Result<std::optional<bool>> GgufFile::get_bool(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::optional<bool>();
  if (const auto* b = std::get_if<bool>(&v->value)) return std::optional<bool>(*b);
  return error("metadata '" + key + "' should be a bool");
}

Result<std::vector<std::string>> GgufFile::get_string_array(const std::string& key) const {
  std::vector<std::string> out;
  const GgufValue* v = find(key);
  if (v == nullptr) return out;
  const auto* items = std::get_if<std::vector<GgufValue>>(&v->value);
  if (items == nullptr) return error("metadata '" + key + "' should be an array of strings");
  out.reserve(items->size());
  for (const GgufValue& item : *items) {
    const auto* s = std::get_if<std::string>(&item.value);
    if (s == nullptr) return error("metadata '" + key + "' should be an array of strings");
    out.push_back(*s);
  }
  return out;
}

Result<std::vector<double>> GgufFile::get_number_array(const std::string& key) const {
  std::vector<double> out;
  const GgufValue* v = find(key);
  if (v == nullptr) return out;
  const auto* items = std::get_if<std::vector<GgufValue>>(&v->value);
  if (items == nullptr) return error("metadata '" + key + "' should be an array of numbers");
  out.reserve(items->size());
  for (const GgufValue& item : *items) {
    if (const auto* d = std::get_if<double>(&item.value)) {
      out.push_back(*d);
    } else if (const auto* i = std::get_if<int64_t>(&item.value)) {
      out.push_back(static_cast<double>(*i));
    } else if (const auto* u = std::get_if<uint64_t>(&item.value)) {
      out.push_back(static_cast<double>(*u));
    } else {
      return error("metadata '" + key + "' should be an array of numbers");
    }
  }
  return out;
}

}  // namespace lm
