#include "loader/torch_checkpoint.h"

#include <map>
#include <set>

namespace lm {
namespace {

using Kind = PickleValue::Kind;

constexpr size_t kMaxRank = 32;
constexpr int64_t kMaxDim = int64_t{1} << 40;
constexpr int64_t kMaxElements = int64_t{1} << 48;

constexpr TorchDTypeInfo kDTypes[] = {
    {TorchDType::kF64, "DoubleStorage", "F64", 8},
    {TorchDType::kF32, "FloatStorage", "F32", 4},
    {TorchDType::kF16, "HalfStorage", "F16", 2},
    {TorchDType::kBF16, "BFloat16Storage", "BF16", 2},
    {TorchDType::kI64, "LongStorage", "I64", 8},
    {TorchDType::kI32, "IntStorage", "I32", 4},
    {TorchDType::kI16, "ShortStorage", "I16", 2},
    {TorchDType::kI8, "CharStorage", "I8", 1},
    {TorchDType::kU8, "ByteStorage", "U8", 1},
    {TorchDType::kBool, "BoolStorage", "BOOL", 1},
};

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return "a bool";
    case Kind::kInt:
      return "an int";
    case Kind::kFloat:
      return "a float";
    case Kind::kString:
      return "a string";
    case Kind::kBytes:
      return "bytes";
    case Kind::kTuple:
      return "a tuple";
    case Kind::kList:
      return "a list";
    case Kind::kDict:
      return "a dict";
    case Kind::kGlobal:
      return "a global";
    case Kind::kPersistentId:
      return "a storage";
    case Kind::kReduced:
      return "an object";
  }
  return "a value";
}

// What one storage key was declared as; every tensor naming the key must agree.
struct StorageInfo {
  TorchDType dtype;
  int64_t num_elements;
  std::span<const uint8_t> bytes;
};

class StateDictReader {
 public:
  StateDictReader(const ZipArchive& archive, std::string prefix, const std::string& path)
      : archive_(archive), prefix_(std::move(prefix)), path_(path) {}

  Result<std::vector<TorchTensor>> read(const PickleValue& root) {
    const PickleValue* dict = &root;
    if (!dict->is(Kind::kDict)) {
      return fail(std::string("the pickled object is ") + kind_name(dict->kind) +
                  ", not a state dict");
    }
    // Training checkpoints wrap the weights as {"state_dict": ...}; TGI's converter unwraps it.
    for (const auto& [key, value] : dict->entries) {
      if (key->is(Kind::kString) && key->text == "state_dict" && value->is(Kind::kDict)) {
        dict = value.get();
        break;
      }
    }
    std::vector<TorchTensor> tensors;
    std::set<std::string> seen;
    for (const auto& [key, value] : dict->entries) {
      if (!key->is(Kind::kString)) {
        return fail(std::string("a state dict key is ") + kind_name(key->kind) + ", not a string");
      }
      if (!seen.insert(key->text).second) return fail("duplicate tensor name '" + key->text + "'");
      LM_ASSIGN_OR_RETURN(TorchTensor tensor, read_tensor(key->text, *value));
      tensors.push_back(std::move(tensor));
    }
    return tensors;
  }

 private:
  Error fail(const std::string& what) const { return Error{path_ + ": " + what}; }

  Result<TorchTensor> read_tensor(const std::string& name, const PickleValue& value) {
    auto bad = [&](const std::string& what) { return fail("tensor '" + name + "': " + what); };
    const PickleValue* v = &value;
    // nn.Parameter wraps the tensor: _rebuild_parameter(data, requires_grad, hooks[, state]).
    if (v->is_global("torch._utils", "_rebuild_parameter") ||
        v->is_global("torch._utils", "_rebuild_parameter_with_state")) {
      if (v->items.empty()) return bad("parameter without data");
      v = v->items[0].get();
    }
    if (!v->is(Kind::kReduced) || !v->is_global("torch._utils", "_rebuild_tensor_v2")) {
      return bad(std::string("value is ") + kind_name(v->kind) + ", not a tensor");
    }
    // _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, hooks[, metadata])
    if (v->items.size() < 4) return bad("_rebuild_tensor_v2 with too few arguments");
    TorchTensor t;
    t.name = name;
    LM_ASSIGN_OR_RETURN(StorageInfo storage, read_storage(name, *v->items[0], t.storage_key));
    t.dtype = storage.dtype;
    t.storage = storage.bytes;
    const PickleValue& offset = *v->items[1];
    if (!offset.is(Kind::kInt) || offset.int_value < 0) {
      return bad("storage offset is not a non-negative int");
    }
    t.storage_offset = offset.int_value;
    LM_ASSIGN_OR_RETURN(t.shape, read_ints(name, "size", *v->items[2]));
    LM_ASSIGN_OR_RETURN(t.strides, read_ints(name, "stride", *v->items[3]));
    if (t.shape.size() != t.strides.size()) {
      return bad("size has " + std::to_string(t.shape.size()) + " dims but stride has " +
                 std::to_string(t.strides.size()));
    }
    int64_t elements = 1;
    for (int64_t d : t.shape) {
      if (d > kMaxDim || (d != 0 && elements > kMaxElements / d)) {
        return bad("absurd dimension " + std::to_string(d));
      }
      elements *= d;
    }
    // The view reads elements offset + sum(i_k * stride_k) for i_k < size_k; the last of them
    // must lie inside the storage. (A storage offset past the end is fine for an empty view.)
    uint64_t last = static_cast<uint64_t>(t.storage_offset);
    bool fits = elements == 0 ? t.storage_offset <= storage.num_elements : true;
    for (size_t k = 0; k < t.shape.size() && elements != 0; ++k) {
      uint64_t step = 0;
      fits = fits &&
             !__builtin_mul_overflow(static_cast<uint64_t>(t.shape[k] - 1),
                                     static_cast<uint64_t>(t.strides[k]), &step) &&
             !__builtin_add_overflow(last, step, &last);
    }
    if (elements != 0) fits = fits && last < static_cast<uint64_t>(storage.num_elements);
    if (!fits) {
      return bad("view (offset " + std::to_string(t.storage_offset) + ", size " +
                 ints_string(t.shape) + ", stride " + ints_string(t.strides) +
                 ") reads past its storage of " + std::to_string(storage.num_elements) +
                 " elements");
    }
    return t;
  }

  // A persistent id: ('storage', <storage class>, key, location, num_elements).
  Result<StorageInfo> read_storage(const std::string& name, const PickleValue& value,
                                   std::string& key_out) {
    auto bad = [&](const std::string& what) { return fail("tensor '" + name + "': " + what); };
    if (!value.is(Kind::kPersistentId)) return bad("storage argument is not a persistent id");
    const PickleValue& pid = *value.items[0];
    if (!pid.is(Kind::kTuple) || pid.items.size() != 5 || !pid.items[0]->is(Kind::kString) ||
        pid.items[0]->text != "storage") {
      return bad("persistent id is not ('storage', type, key, location, size)");
    }
    const PickleValue& type = *pid.items[1];
    const PickleValue& key = *pid.items[2];
    const PickleValue& numel = *pid.items[4];
    if (!key.is(Kind::kString) || !numel.is(Kind::kInt) || numel.int_value < 0 ||
        numel.int_value > kMaxElements) {
      return bad("storage key or size is malformed");
    }
    const TorchDTypeInfo* info = nullptr;
    for (const TorchDTypeInfo& d : kDTypes) {
      if (type.is_global("torch", d.storage_class)) info = &d;
    }
    if (info == nullptr) {
      return bad("storage type is " + (type.is(Kind::kGlobal) ? type.text + "." + type.name
                                                              : std::string(kind_name(type.kind))));
    }
    key_out = key.text;
    auto known = storages_.find(key.text);
    if (known != storages_.end()) {
      if (known->second.dtype != info->dtype || known->second.num_elements != numel.int_value) {
        return bad("storage '" + key.text + "' is declared with two different types or sizes");
      }
      return known->second;
    }
    const std::string entry = prefix_ + "/data/" + key.text;
    auto bytes = archive_.find(entry);
    if (!bytes) return bad("storage entry '" + entry + "' is missing from the archive");
    const uint64_t expected = static_cast<uint64_t>(numel.int_value) * info->element_bytes;
    if (bytes->size() != expected) {
      return bad("storage '" + key.text + "' holds " + std::to_string(bytes->size()) +
                 " bytes but " + std::to_string(numel.int_value) + " elements of " +
                 std::string(info->safetensors_name) + " need " + std::to_string(expected));
    }
    StorageInfo storage{info->dtype, numel.int_value, *bytes};
    storages_.emplace(key.text, storage);
    return storage;
  }

  Result<std::vector<int64_t>> read_ints(const std::string& name, const char* what,
                                         const PickleValue& value) {
    auto bad = [&]() {
      return fail("tensor '" + name + "': " + what + " is not a tuple of non-negative ints");
    };
    if (!value.is(Kind::kTuple)) return bad();
    if (value.items.size() > kMaxRank) {
      return fail("tensor '" + name + "' has more than " + std::to_string(kMaxRank) + " dims");
    }
    std::vector<int64_t> ints;
    for (const auto& item : value.items) {
      if (!item->is(Kind::kInt) || item->int_value < 0 || item->int_value > kMaxElements) {
        return bad();
      }
      ints.push_back(item->int_value);
    }
    return ints;
  }

  static std::string ints_string(const std::vector<int64_t>& ints) {
    std::string s = "[";
    for (size_t i = 0; i < ints.size(); ++i) s += (i ? ", " : "") + std::to_string(ints[i]);
    return s + "]";
  }

  const ZipArchive& archive_;
  std::string prefix_;
  const std::string& path_;
  std::map<std::string, StorageInfo> storages_;
};

// torch.save names every entry <archive>/...; the folder name follows the file name, so find it
// from the one data.pkl at depth one.
Result<std::string> archive_prefix(const ZipArchive& archive, const std::string& path) {
  std::string prefix;
  int found = 0;
  for (const auto& [name, bytes] : archive.entries()) {
    const size_t slash = name.find('/');
    if (slash != std::string::npos && slash > 0 && name.substr(slash) == "/data.pkl") {
      prefix = name.substr(0, slash);
      ++found;
    }
  }
  if (found == 0) return Error{path + ": zip archive without <archive>/data.pkl (not torch.save)"};
  if (found > 1) return Error{path + ": zip archive with several data.pkl entries"};
  return prefix;
}

Status check_byte_order(const ZipArchive& archive, const std::string& prefix,
                        const std::string& path) {
  auto bytes = archive.find(prefix + "/byteorder");
  if (!bytes) return {};  // written since torch 1.10; older archives are little-endian
  const std::string order(bytes->begin(), bytes->end());
  if (order == "little") return {};
  if (order == "big") return Error{path + ": big-endian checkpoints are not supported"};
  return Error{path + ": unknown byte order '" + order.substr(0, 16) + "'"};
}

}  // namespace

const TorchDTypeInfo& torch_dtype_info(TorchDType dtype) {
  for (const TorchDTypeInfo& info : kDTypes) {
    if (info.dtype == dtype) return info;
  }
  LM_CHECK_MSG(false, "TorchDType missing from kDTypes");
  return kDTypes[0];
}

int64_t TorchTensor::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

uint64_t TorchTensor::num_bytes() const {
  return static_cast<uint64_t>(num_elements()) * torch_dtype_info(dtype).element_bytes;
}

bool TorchTensor::is_contiguous() const {
  int64_t expected = 1;
  for (size_t k = shape.size(); k-- > 0;) {
    if (shape[k] == 0) return true;
    if (shape[k] != 1 && strides[k] != expected) return false;
    expected *= shape[k];
  }
  return true;
}

const uint8_t* TorchTensor::first_element() const {
  return storage.data() + storage_offset * torch_dtype_info(dtype).element_bytes;
}

const UnpicklePolicy& torch_state_dict_policy() {
  static const UnpicklePolicy policy = [] {
    UnpicklePolicy p;
    p.callables = {{"collections", "OrderedDict"},
                   {"torch._utils", "_rebuild_tensor_v2"},
                   {"torch._utils", "_rebuild_parameter"},
                   {"torch._utils", "_rebuild_parameter_with_state"}};
    for (const TorchDTypeInfo& d : kDTypes) p.constants.emplace_back("torch", d.storage_class);
    return p;
  }();
  return policy;
}

Result<TorchCheckpoint> TorchCheckpoint::open(const std::string& path) {
  LM_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path));
  LM_ASSIGN_OR_RETURN(TorchCheckpoint ckpt, parse(file.bytes(), path));
  ckpt.file_ = std::move(file);  // the mapping's address, and so every view, stays put
  return ckpt;
}

Result<TorchCheckpoint> TorchCheckpoint::parse(std::span<const uint8_t> bytes,
                                               const std::string& label) {
  const std::string& path = label;
  TorchCheckpoint ckpt;
  ckpt.label_ = label;
  ckpt.file_size_ = bytes.size();
  if (!has_zip_signature(bytes)) {
    // The legacy format is a bare pickle stream (protocol 2 opens with 0x80 0x02).
    if (bytes.size() >= 2 && bytes[0] == 0x80 && bytes[1] == 0x02) {
      return Error{path +
                   ": legacy (pre-1.6) torch.save format is not supported; re-save with "
                   "torch>=1.6"};
    }
    return Error{path + ": not a PyTorch checkpoint (no zip signature)"};
  }
  LM_ASSIGN_OR_RETURN(ckpt.archive_, ZipArchive::parse(bytes, path));
  LM_ASSIGN_OR_RETURN(std::string prefix, archive_prefix(ckpt.archive_, path));
  LM_RETURN_IF_ERROR(check_byte_order(ckpt.archive_, prefix, path));
  auto pickle = unpickle(*ckpt.archive_.find(prefix + "/data.pkl"), torch_state_dict_policy());
  if (!pickle.ok()) return Error{path + ": " + pickle.error().message};
  StateDictReader reader(ckpt.archive_, prefix, path);
  LM_ASSIGN_OR_RETURN(ckpt.tensors_, reader.read(**pickle));
  return ckpt;
}

}  // namespace lm
