#include "loader/zip_archive.h"

#include <algorithm>
#include <vector>

#include "base/byte_reader.h"

namespace lm {
namespace {

constexpr uint32_t kLocalHeaderSig = 0x04034b50;
constexpr uint32_t kCentralHeaderSig = 0x02014b50;
constexpr uint32_t kEndSig = 0x06054b50;
constexpr uint32_t kZip64EndSig = 0x06064b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr uint64_t kEndSize = 22;
constexpr uint64_t kZip64LocatorSize = 20;
constexpr uint64_t kZip64EndSize = 56;
constexpr uint64_t kCentralHeaderSize = 46;
constexpr uint64_t kLocalHeaderSize = 30;
constexpr uint64_t kMaxCommentSize = 0xffff;
constexpr uint64_t kMaxEntries = 1u << 20;  // a checkpoint has one entry per storage
constexpr uint16_t kFlagEncrypted = 1u << 0;

// Where the central directory lies, from the end records.
struct Directory {
  uint64_t num_entries = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t end = 0;  // first byte of the end records: the directory must stop before it
};

// One central directory entry, before its local header is checked.
struct CentralEntry {
  std::string name;
  uint64_t local_offset = 0;
  uint64_t size = 0;
};

class Parser {
 public:
  Parser(std::span<const uint8_t> bytes, const std::string& label) : bytes_(bytes), label_(label) {}

  Error fail(const std::string& what) const { return Error{label_ + ": " + what}; }

  // A reader over [offset, offset + length), or an error when that range leaves the file.
  Result<ByteReader> at(uint64_t offset, uint64_t length, const char* what) const {
    if (offset > bytes_.size() || length > bytes_.size() - offset) {
      return fail(std::string(what) + " at offset " + std::to_string(offset) + " (" +
                  std::to_string(length) + " bytes) lies outside the " +
                  std::to_string(bytes_.size()) + "-byte file (truncated or corrupt zip)");
    }
    return ByteReader(bytes_.subspan(offset, length));
  }

  Result<Directory> find_directory() const {
    if (bytes_.size() < kEndSize) return fail("too short to be a zip archive");
    // The end record sits before a comment of up to 64 KiB; scan backwards for its signature
    // and take the first one whose comment length reaches exactly the end of the file.
    const uint64_t lowest =
        bytes_.size() > kEndSize + kMaxCommentSize ? bytes_.size() - kEndSize - kMaxCommentSize : 0;
    for (uint64_t pos = bytes_.size() - kEndSize + 1; pos-- > lowest;) {
      if (read_u32(pos) != kEndSig) continue;
      if (pos + kEndSize + read_u16(pos + 20) != bytes_.size()) continue;
      return read_end_record(pos);
    }
    return fail("no zip end-of-central-directory record (not a zip archive, or truncated)");
  }

  Result<std::vector<CentralEntry>> read_directory(const Directory& dir) const {
    if (dir.num_entries > kMaxEntries) {
      return fail("claims " + std::to_string(dir.num_entries) + " entries (limit " +
                  std::to_string(kMaxEntries) + ")");
    }
    if (dir.offset > dir.end || dir.size > dir.end - dir.offset) {
      return fail("central directory [" + std::to_string(dir.offset) + ", +" +
                  std::to_string(dir.size) + ") overlaps the end records or leaves the file");
    }
    LM_ASSIGN_OR_RETURN(ByteReader r, at(dir.offset, dir.size, "central directory"));
    std::vector<CentralEntry> entries;
    for (uint64_t i = 0; i < dir.num_entries; ++i) {
      LM_ASSIGN_OR_RETURN(CentralEntry entry, read_central_entry(r, i));
      entries.push_back(std::move(entry));
    }
    if (r.remaining() != 0) {
      return fail("central directory has " + std::to_string(r.remaining()) +
                  " bytes after its last entry");
    }
    return entries;
  }

  // The data span of `entry`, from its local header. Checks the local header agrees with the
  // central directory (name, method) so the two views of the file cannot disagree.
  Result<std::span<const uint8_t>> locate_data(const CentralEntry& entry, uint64_t limit) const {
    const std::string where = "entry '" + entry.name + "'";
    LM_ASSIGN_OR_RETURN(ByteReader r,
                        at(entry.local_offset, kLocalHeaderSize, "local header of an entry"));
    LM_ASSIGN_OR_RETURN(uint32_t sig, r.read<uint32_t>());
    if (sig != kLocalHeaderSig) return fail(where + ": bad local header signature");
    LM_RETURN_IF_ERROR(r.skip(2));  // version needed
    LM_ASSIGN_OR_RETURN(uint16_t flags, r.read<uint16_t>());
    LM_ASSIGN_OR_RETURN(uint16_t method, r.read<uint16_t>());
    if (flags & kFlagEncrypted) return fail(where + " is encrypted");
    if (method != 0) return fail(where + ": " + compressed_message(method));
    LM_RETURN_IF_ERROR(r.skip(4 + 4 + 4 + 4));  // time, date, crc, sizes (trusted from central)
    LM_ASSIGN_OR_RETURN(uint16_t name_len, r.read<uint16_t>());
    LM_ASSIGN_OR_RETURN(uint16_t extra_len, r.read<uint16_t>());
    const uint64_t name_offset = entry.local_offset + kLocalHeaderSize;
    LM_ASSIGN_OR_RETURN(ByteReader name_reader, at(name_offset, name_len, "local entry name"));
    LM_ASSIGN_OR_RETURN(std::string local_name, name_reader.read_string(name_len));
    if (local_name != entry.name) {
      return fail(where + ": local header names it '" + local_name + "'");
    }
    const uint64_t data_offset = name_offset + name_len + extra_len;
    if (data_offset > limit || entry.size > limit - data_offset) {
      return fail(where + ": data [" + std::to_string(data_offset) + ", +" +
                  std::to_string(entry.size) + ") runs into the central directory or past the " +
                  "end of the file (truncated or corrupt zip)");
    }
    return bytes_.subspan(data_offset, entry.size);
  }

 private:
  uint16_t read_u16(uint64_t pos) const {
    return static_cast<uint16_t>(bytes_[pos] | (bytes_[pos + 1] << 8));
  }
  uint32_t read_u32(uint64_t pos) const {
    return static_cast<uint32_t>(read_u16(pos)) | (static_cast<uint32_t>(read_u16(pos + 2)) << 16);
  }

  static std::string compressed_message(uint16_t method) {
    return "compressed with method " + std::to_string(method) +
           "; only stored (uncompressed) entries are supported, as torch.save writes them";
  }

  Result<Directory> read_end_record(uint64_t pos) const {
    LM_ASSIGN_OR_RETURN(ByteReader r, at(pos + 4, kEndSize - 4, "end record"));
    LM_ASSIGN_OR_RETURN(uint16_t disk, r.read<uint16_t>());
    LM_ASSIGN_OR_RETURN(uint16_t dir_disk, r.read<uint16_t>());
    LM_ASSIGN_OR_RETURN(uint16_t disk_entries, r.read<uint16_t>());
    LM_ASSIGN_OR_RETURN(uint16_t num_entries, r.read<uint16_t>());
    LM_ASSIGN_OR_RETURN(uint32_t dir_size, r.read<uint32_t>());
    LM_ASSIGN_OR_RETURN(uint32_t dir_offset, r.read<uint32_t>());
    Directory dir{num_entries, dir_offset, dir_size, pos};
    // torch.save always adds the ZIP64 records; a locator right before the end record says so.
    if (pos >= kZip64LocatorSize && read_u32(pos - kZip64LocatorSize) == kZip64LocatorSig) {
      return read_zip64_records(pos - kZip64LocatorSize);
    }
    if (disk != 0 || dir_disk != 0 || disk_entries != num_entries) {
      return fail("multi-disk (spanned) zip archives are not supported");
    }
    if (num_entries == 0xffff || dir_size == 0xffffffff || dir_offset == 0xffffffff) {
      return fail("end record needs ZIP64 records but has no ZIP64 locator");
    }
    return dir;
  }

  Result<Directory> read_zip64_records(uint64_t locator_pos) const {
    LM_ASSIGN_OR_RETURN(ByteReader loc, at(locator_pos + 4, kZip64LocatorSize - 4, "locator"));
    LM_ASSIGN_OR_RETURN(uint32_t record_disk, loc.read<uint32_t>());
    LM_ASSIGN_OR_RETURN(uint64_t record_pos, loc.read<uint64_t>());
    LM_ASSIGN_OR_RETURN(uint32_t num_disks, loc.read<uint32_t>());
    if (record_disk != 0 || num_disks > 1) {
      return fail("multi-disk (spanned) zip archives are not supported");
    }
    if (record_pos > locator_pos || locator_pos - record_pos < kZip64EndSize) {
      return fail("ZIP64 end record offset " + std::to_string(record_pos) +
                  " does not lie before its locator");
    }
    LM_ASSIGN_OR_RETURN(ByteReader r, at(record_pos, kZip64EndSize, "ZIP64 end record"));
    LM_ASSIGN_OR_RETURN(uint32_t sig, r.read<uint32_t>());
    if (sig != kZip64EndSig) return fail("bad ZIP64 end record signature");
    LM_RETURN_IF_ERROR(r.skip(8 + 2 + 2));  // record size, versions
    LM_ASSIGN_OR_RETURN(uint32_t disk, r.read<uint32_t>());
    LM_ASSIGN_OR_RETURN(uint32_t dir_disk, r.read<uint32_t>());
    LM_ASSIGN_OR_RETURN(uint64_t disk_entries, r.read<uint64_t>());
    Directory dir;
    LM_ASSIGN_OR_RETURN(dir.num_entries, r.read<uint64_t>());
    LM_ASSIGN_OR_RETURN(dir.size, r.read<uint64_t>());
    LM_ASSIGN_OR_RETURN(dir.offset, r.read<uint64_t>());
    if (disk != 0 || dir_disk != 0 || disk_entries != dir.num_entries) {
      return fail("multi-disk (spanned) zip archives are not supported");
    }
    dir.end = record_pos;
    return dir;
  }

  Result<CentralEntry> read_central_entry(ByteReader& r, uint64_t index) const {
    const std::string where = "central directory entry " + std::to_string(index);
    auto truncated = [&]() {
      return fail(where + " is truncated (the directory is shorter than its entries)");
    };
    if (r.remaining() < kCentralHeaderSize) return truncated();
    const uint32_t sig = *r.read<uint32_t>();
    if (sig != kCentralHeaderSig) return fail(where + ": bad signature");
    LM_RETURN_IF_ERROR(r.skip(2 + 2));  // versions
    const uint16_t flags = *r.read<uint16_t>();
    const uint16_t method = *r.read<uint16_t>();
    LM_RETURN_IF_ERROR(r.skip(2 + 2 + 4));  // time, date, crc
    uint64_t compressed = *r.read<uint32_t>();
    uint64_t size = *r.read<uint32_t>();
    const uint16_t name_len = *r.read<uint16_t>();
    const uint16_t extra_len = *r.read<uint16_t>();
    const uint16_t comment_len = *r.read<uint16_t>();
    const uint16_t disk = *r.read<uint16_t>();
    LM_RETURN_IF_ERROR(r.skip(2 + 4));  // attributes
    uint64_t local_offset = *r.read<uint32_t>();
    if (r.remaining() < uint64_t{name_len} + extra_len + comment_len) return truncated();
    CentralEntry entry;
    entry.name = *r.read_string(name_len);
    LM_ASSIGN_OR_RETURN(std::string extra, r.read_string(extra_len));
    LM_RETURN_IF_ERROR(r.skip(comment_len));
    if (entry.name.empty()) return fail(where + " has an empty name");
    const std::string named = "entry '" + entry.name + "'";
    if (flags & kFlagEncrypted) return fail(named + " is encrypted");
    if (method != 0) return fail(named + ": " + compressed_message(method));

    // ZIP64 extra field: 8-byte values for exactly those fields saturated at 0xffffffff, in the
    // order uncompressed size, compressed size, local header offset.
    ByteReader extras(std::span(reinterpret_cast<const uint8_t*>(extra.data()), extra.size()));
    while (extras.remaining() >= 4) {
      const uint16_t id = *extras.read<uint16_t>();
      const uint16_t len = *extras.read<uint16_t>();
      if (len > extras.remaining()) return fail(named + ": extra field runs past its end");
      if (id != kZip64ExtraId) {
        LM_RETURN_IF_ERROR(extras.skip(len));
        continue;
      }
      ByteReader z(
          std::span(reinterpret_cast<const uint8_t*>(extra.data()) + extras.offset(), len));
      LM_RETURN_IF_ERROR(extras.skip(len));
      for (uint64_t* field : {&size, &compressed, &local_offset}) {
        if (*field != 0xffffffff) continue;
        auto value = z.read<uint64_t>();
        if (!value.ok()) return fail(named + ": ZIP64 extra field is too short");
        *field = *value;
      }
    }
    if (size == 0xffffffff || compressed == 0xffffffff || local_offset == 0xffffffff) {
      return fail(named + ": sizes need a ZIP64 extra field, which is missing");
    }
    if (disk != 0 && disk != 0xffff) return fail(named + " lies on another disk");
    if (compressed != size) {
      return fail(named + ": stored entry has compressed size " + std::to_string(compressed) +
                  " but size " + std::to_string(size));
    }
    entry.size = size;
    entry.local_offset = local_offset;
    return entry;
  }

  std::span<const uint8_t> bytes_;
  const std::string& label_;
};

}  // namespace

bool has_zip_signature(std::span<const uint8_t> bytes) {
  return bytes.size() >= 4 && bytes[0] == 'P' && bytes[1] == 'K' && bytes[2] == 3 && bytes[3] == 4;
}

Result<ZipArchive> ZipArchive::open(const std::string& path) {
  LM_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path));
  LM_ASSIGN_OR_RETURN(ZipArchive archive, parse(file.bytes(), path));
  archive.file_ = std::move(file);  // the mapping's address, and so every span, stays put
  return archive;
}

Result<ZipArchive> ZipArchive::parse(std::span<const uint8_t> bytes, const std::string& label) {
  Parser parser(bytes, label);
  LM_ASSIGN_OR_RETURN(Directory dir, parser.find_directory());
  LM_ASSIGN_OR_RETURN(std::vector<CentralEntry> central, parser.read_directory(dir));

  // Entries must not share bytes: sort by local header and require each one's data to end
  // before the next header starts (a crafted directory could otherwise alias entries).
  std::sort(central.begin(), central.end(), [](const CentralEntry& a, const CentralEntry& b) {
    return a.local_offset < b.local_offset;
  });
  ZipArchive archive;
  archive.label_ = label;
  for (size_t i = 0; i < central.size(); ++i) {
    const uint64_t limit = i + 1 < central.size() ? central[i + 1].local_offset : dir.offset;
    if (central[i].local_offset >= limit) {
      return parser.fail("entry '" + central[i].name + "' overlaps the next entry or lies " +
                         "inside the central directory");
    }
    LM_ASSIGN_OR_RETURN(std::span<const uint8_t> data, parser.locate_data(central[i], limit));
    if (!archive.entries_.emplace(central[i].name, data).second) {
      return parser.fail("duplicate entry '" + central[i].name + "'");
    }
  }
  return archive;
}

std::optional<std::span<const uint8_t>> ZipArchive::find(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

}  // namespace lm
