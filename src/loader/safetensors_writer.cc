#include "loader/safetensors_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "base/json_string.h"

namespace lm {
namespace {

constexpr uint64_t kMaxFileBytes = uint64_t{1} << 62;

struct DTypeLayout {
  const char* name;
  int64_t element_bytes;
  int rank;  // the safetensors library lays out higher ranks first
};

// Rank follows the order of the Rust crate's Dtype enum (BOOL < U8 < I8 < I16 < U16 < F16 < BF16
// < I32 < U32 < F32 < F64 < I64 < U64), which its writer sorts by, descending.
constexpr DTypeLayout kLayouts[] = {
    {"BOOL", 1, 0}, {"U8", 1, 1},   {"I8", 1, 2},   {"I16", 2, 3}, {"U16", 2, 4},
    {"F16", 2, 5},  {"BF16", 2, 6}, {"I32", 4, 7},  {"U32", 4, 8}, {"F32", 4, 9},
    {"F64", 8, 10}, {"I64", 8, 11}, {"U64", 8, 12},
};

const DTypeLayout* find_layout(const std::string& dtype) {
  for (const DTypeLayout& l : kLayouts) {
    if (dtype == l.name) return &l;
  }
  return nullptr;
}

}  // namespace

Error SafetensorsWriter::fail(const std::string& what) const { return Error{path_ + ": " + what}; }

Result<SafetensorsLayout> layout_safetensors(std::vector<SafetensorsTensorSpec> tensors,
                                             const std::map<std::string, std::string>& metadata,
                                             const std::string& label) {
  auto fail = [&](const std::string& what) { return Error{label + ": " + what}; };
  for (const SafetensorsTensorSpec& t : tensors) {
    if (find_layout(t.dtype) == nullptr) return fail("cannot write dtype '" + t.dtype + "'");
    if (t.name == "__metadata__") return fail("a tensor may not be named __metadata__");
  }
  std::stable_sort(tensors.begin(), tensors.end(),
                   [](const SafetensorsTensorSpec& a, const SafetensorsTensorSpec& b) {
                     const int ra = find_layout(a.dtype)->rank;
                     const int rb = find_layout(b.dtype)->rank;
                     return ra != rb ? ra > rb : a.name < b.name;
                   });
  for (size_t i = 1; i < tensors.size(); ++i) {
    if (tensors[i].name == tensors[i - 1].name) {
      return fail("duplicate tensor '" + tensors[i].name + "'");
    }
  }

  // The header, as serde_json writes the crate's Metadata: __metadata__ first, then the tensors
  // in data order; padded with spaces so the data starts 8-byte aligned.
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [key, value] : metadata) {
      if (!first) header += ',';
      first = false;
      append_json_string(header, key);
      header += ':';
      append_json_string(header, value);
    }
    header += "},";
  }
  uint64_t offset = 0;
  for (const SafetensorsTensorSpec& t : tensors) {
    uint64_t bytes = static_cast<uint64_t>(find_layout(t.dtype)->element_bytes);
    std::string shape;
    for (int64_t d : t.shape) {
      if (d < 0) return fail("tensor '" + t.name + "' has a negative dimension");
      if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes) ||
          bytes > kMaxFileBytes) {
        return fail("tensor '" + t.name + "' is absurdly large");
      }
      shape += (shape.empty() ? "" : ",") + std::to_string(d);
    }
    const uint64_t end = offset + bytes;  // both at most kMaxFileBytes: no overflow
    if (end > kMaxFileBytes) return fail("tensors are absurdly large");
    append_json_string(header, t.name);
    header += ":{\"dtype\":\"" + t.dtype + "\",\"shape\":[" + shape + "],\"data_offsets\":[" +
              std::to_string(offset) + "," + std::to_string(end) + "]},";
    offset = end;
  }
  if (header.back() == ',') header.pop_back();
  header += '}';
  header.append((8 - header.size() % 8) % 8, ' ');
  return SafetensorsLayout{std::move(tensors), std::move(header), offset};
}

Result<SafetensorsWriter> SafetensorsWriter::create(const std::string& path,
                                                    SafetensorsLayout layout) {
  SafetensorsWriter w;
  w.path_ = path;
  w.tmp_path_ = path + ".tmp";
  w.layout_ = std::move(layout);
  const std::string& header = w.layout_.header;
  // O_NOFOLLOW: never write through a link someone left at the temporary name.
  const int fd =
      ::open(w.tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0)
    return w.fail(std::string("cannot create ") + w.tmp_path_ + ": " + std::strerror(errno));
  w.file_ = ::fdopen(fd, "wb");
  if (w.file_ == nullptr) {
    ::close(fd);
    ::unlink(w.tmp_path_.c_str());
    return w.fail("cannot open a stream on " + w.tmp_path_);
  }
  std::setvbuf(w.file_, nullptr, _IOFBF, size_t{1} << 20);
  const uint64_t header_len = header.size();
  uint8_t len_bytes[8];
  for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<uint8_t>(header_len >> (8 * i));
  if (std::fwrite(len_bytes, 1, 8, w.file_) != 8 ||
      std::fwrite(header.data(), 1, header.size(), w.file_) != header.size()) {
    return w.abandon("cannot write " + w.tmp_path_ + ": " + std::strerror(errno));
  }
  return w;
}

SafetensorsWriter::SafetensorsWriter(SafetensorsWriter&& other) noexcept
    : path_(std::move(other.path_)),
      tmp_path_(std::move(other.tmp_path_)),
      file_(std::exchange(other.file_, nullptr)),
      layout_(std::move(other.layout_)),
      written_(other.written_) {}

SafetensorsWriter::~SafetensorsWriter() {
  if (file_ != nullptr) {
    std::fclose(file_);
    ::unlink(tmp_path_.c_str());
  }
}

Status SafetensorsWriter::append(std::span<const uint8_t> bytes) {
  if (file_ == nullptr) return fail("append after finish");
  if (bytes.size() > layout_.data_bytes - written_) {
    return fail("more tensor bytes than the header declares");
  }
  if (std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) {
    return abandon("cannot write " + tmp_path_ + ": " + std::strerror(errno));
  }
  written_ += bytes.size();
  return {};
}

Status SafetensorsWriter::finish() {
  if (file_ == nullptr) return fail("finish called twice");
  if (written_ != layout_.data_bytes) {
    return fail("only " + std::to_string(written_) + " of " + std::to_string(layout_.data_bytes) +
                " tensor bytes were written");
  }
  std::FILE* file = std::exchange(file_, nullptr);
  const bool flushed = std::fflush(file) == 0 && ::fsync(::fileno(file)) == 0;
  const int err = errno;
  const bool closed = std::fclose(file) == 0;
  if (!flushed || !closed || ::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    const std::string reason = std::strerror(flushed && closed ? errno : err);
    ::unlink(tmp_path_.c_str());
    return fail("cannot complete " + tmp_path_ + ": " + reason + removed_note());
  }
  return {};
}

// What a failed write leaves: nothing (a full disk is the usual cause).
std::string SafetensorsWriter::removed_note() const {
  return "; the partial file was removed, nothing is left under the name " + path_;
}

Error SafetensorsWriter::abandon(const std::string& what) {
  if (file_ != nullptr) {
    std::fclose(std::exchange(file_, nullptr));
    ::unlink(tmp_path_.c_str());
  }
  return fail(what + " after " + std::to_string(written_) + " of " +
              std::to_string(layout_.data_bytes) + " tensor bytes" + removed_note());
}

}  // namespace lm
