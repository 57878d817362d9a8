// Builds small ZIP archives byte by byte (stored entries, optional ZIP64 records, data
// descriptors and local-header padding as torch.save writes them), and the opcodes of a pickle,
// so loader tests can vary one field at a time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "test_files.h"

namespace lm::testing {

struct ZipEntrySpec {
  std::string name;
  std::string data;
  uint16_t method = 0;  // 0 stored, 8 deflate (only the header says so)
};

struct ZipOptions {
  bool zip64 = false;            // ZIP64 extra fields, end record and locator
  bool data_descriptor = false;  // sizes zero in the local header, a descriptor after the data
  uint16_t local_padding = 0;    // bytes of local extra field before the data (torch aligns)
};

inline std::vector<uint8_t> make_zip(const std::vector<ZipEntrySpec>& entries,
                                     const ZipOptions& options = {}) {
  Bytes out;
  std::vector<uint64_t> offsets;
  for (const ZipEntrySpec& e : entries) {
    offsets.push_back(out.data.size());
    const uint32_t size = options.data_descriptor ? 0 : static_cast<uint32_t>(e.data.size());
    out.put<uint32_t>(0x04034b50).put<uint16_t>(45);
    out.put<uint16_t>(options.data_descriptor ? 0x0808 : 0).put<uint16_t>(e.method);
    out.put<uint32_t>(0).put<uint32_t>(0);  // time/date, crc
    out.put<uint32_t>(size).put<uint32_t>(size);
    out.put<uint16_t>(static_cast<uint16_t>(e.name.size())).put<uint16_t>(options.local_padding);
    out.raw(e.name).raw(std::string(options.local_padding, 'Z')).raw(e.data);
    if (options.data_descriptor) {
      out.put<uint32_t>(0x08074b50).put<uint32_t>(0);
      out.put<uint32_t>(static_cast<uint32_t>(e.data.size()));
      out.put<uint32_t>(static_cast<uint32_t>(e.data.size()));
    }
  }
  const uint64_t dir_offset = out.data.size();
  for (size_t i = 0; i < entries.size(); ++i) {
    const ZipEntrySpec& e = entries[i];
    const bool z = options.zip64;
    out.put<uint32_t>(0x02014b50).put<uint16_t>(45).put<uint16_t>(45);
    out.put<uint16_t>(options.data_descriptor ? 0x0808 : 0).put<uint16_t>(e.method);
    out.put<uint32_t>(0).put<uint32_t>(0);
    out.put<uint32_t>(z ? 0xffffffff : static_cast<uint32_t>(e.data.size()));
    out.put<uint32_t>(z ? 0xffffffff : static_cast<uint32_t>(e.data.size()));
    out.put<uint16_t>(static_cast<uint16_t>(e.name.size())).put<uint16_t>(z ? 28 : 0);
    out.put<uint16_t>(0).put<uint16_t>(0).put<uint16_t>(0).put<uint32_t>(0);
    out.put<uint32_t>(z ? 0xffffffff : static_cast<uint32_t>(offsets[i]));
    out.raw(e.name);
    if (z) {
      out.put<uint16_t>(1).put<uint16_t>(24);
      out.put<uint64_t>(e.data.size()).put<uint64_t>(e.data.size()).put<uint64_t>(offsets[i]);
    }
  }
  const uint64_t dir_size = out.data.size() - dir_offset;
  if (options.zip64) {
    const uint64_t record = out.data.size();
    out.put<uint32_t>(0x06064b50).put<uint64_t>(44).put<uint16_t>(45).put<uint16_t>(45);
    out.put<uint32_t>(0).put<uint32_t>(0);
    out.put<uint64_t>(entries.size()).put<uint64_t>(entries.size());
    out.put<uint64_t>(dir_size).put<uint64_t>(dir_offset);
    out.put<uint32_t>(0x07064b50).put<uint32_t>(0).put<uint64_t>(record).put<uint32_t>(1);
  }
  const bool z = options.zip64;
  out.put<uint32_t>(0x06054b50).put<uint16_t>(0).put<uint16_t>(0);
  out.put<uint16_t>(z ? 0xffff : static_cast<uint16_t>(entries.size()));
  out.put<uint16_t>(z ? 0xffff : static_cast<uint16_t>(entries.size()));
  out.put<uint32_t>(z ? 0xffffffff : static_cast<uint32_t>(dir_size));
  out.put<uint32_t>(z ? 0xffffffff : static_cast<uint32_t>(dir_offset));
  out.put<uint16_t>(0);
  return out.data;
}

// Pickle opcodes with their arguments, for hand-assembled protocol-2 streams.
namespace pk {
inline std::string u32(uint32_t v) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i) s[i] = static_cast<char>(v >> (8 * i));
  return s;
}
inline std::string proto() { return "\x80\x02"; }
inline std::string global(const std::string& module, const std::string& name) {
  return "c" + module + "\n" + name + "\n";
}
inline std::string str(const std::string& s) {
  return "X" + u32(static_cast<uint32_t>(s.size())) + s;
}
inline std::string int1(uint8_t v) { return std::string("K") + static_cast<char>(v); }
inline std::string binint(int32_t v) { return "J" + u32(static_cast<uint32_t>(v)); }
inline std::string put(uint8_t i) { return std::string("q") + static_cast<char>(i); }
inline std::string get(uint8_t i) { return std::string("h") + static_cast<char>(i); }
inline const std::string kMark = "(";
inline const std::string kTuple = "t";
inline const std::string kEmptyTuple = ")";
inline const std::string kTuple1 = "\x85";
inline const std::string kTuple2 = "\x86";
inline const std::string kReduce = "R";
inline const std::string kSetItems = "u";
inline const std::string kPersId = "Q";
inline const std::string kFalse = "\x89";
inline const std::string kStop = ".";

inline std::string ordered_dict() {
  return global("collections", "OrderedDict") + kEmptyTuple + kReduce;
}
// _rebuild_tensor_v2(('storage', FloatStorage, key, 'cpu', numel), offset, size, stride, False,
// OrderedDict()) for a rank-1 or rank-2 view.
inline std::string tensor(const std::string& key, int numel, int offset,
                          const std::vector<int>& size, const std::vector<int>& stride,
                          const std::string& storage_class = "FloatStorage") {
  auto ints = [](const std::vector<int>& v) {
    std::string s = kMark;
    for (int x : v) s += binint(x);
    return s + kTuple;
  };
  return global("torch._utils", "_rebuild_tensor_v2") + kMark + kMark + str("storage") +
         global("torch", storage_class) + str(key) + str("cpu") + binint(numel) + kTuple + kPersId +
         binint(offset) + ints(size) + ints(stride) + kFalse + ordered_dict() + kTuple + kReduce;
}
// {name: tensor, ...} as torch.save writes a state dict.
inline std::string state_dict(const std::vector<std::pair<std::string, std::string>>& items) {
  std::string s = proto() + ordered_dict() + kMark;
  for (const auto& [name, value] : items) s += str(name) + value;
  return s + kSetItems + kStop;
}
}  // namespace pk

// A torch.save-style archive: <prefix>/data.pkl, <prefix>/byteorder and <prefix>/data/<key>.
inline std::vector<uint8_t> make_torch_zip(
    const std::string& pickle, const std::vector<std::pair<std::string, std::string>>& storages,
    const std::string& byteorder = "little", const std::string& prefix = "archive") {
  std::vector<ZipEntrySpec> entries = {{prefix + "/data.pkl", pickle}};
  if (!byteorder.empty()) entries.push_back({prefix + "/byteorder", byteorder});
  for (const auto& [key, bytes] : storages) entries.push_back({prefix + "/data/" + key, bytes});
  entries.push_back({prefix + "/version", "3\n"});
  return make_zip(entries, {.zip64 = true, .data_descriptor = true, .local_padding = 20});
}

}  // namespace lm::testing
