// A restricted unpickler: a pure data stack machine for the pickles inside torch.save archives.
// Nothing is ever imported, called or executed. GLOBAL names outside an allow-list, and every
// opcode a tensor state dict does not need (INST, OBJ, NEWOBJ, EXT*, text-mode opcodes, ...), are
// refused with an Error that names them. REDUCE on an allow-listed callable records the call as a
// kReduced node for the caller to interpret; only `collections.OrderedDict()` is evaluated (to an
// empty dict), because SETITEMS must then fill it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"

namespace lm {

struct PickleValue;
using PickleValuePtr = std::shared_ptr<const PickleValue>;

struct PickleValue {
  enum class Kind : uint8_t {
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,        // str (and protocol-0/1 byte strings, which torch never writes for names)
    kBytes,         // bytes
    kTuple,         // items
    kList,          // items
    kDict,          // entries, in insertion order (OrderedDict and dict alike)
    kGlobal,        // module, name: an allow-listed reference, never resolved
    kPersistentId,  // items[0]: the persistent id (torch: the storage descriptor tuple)
    kReduced,       // module, name: the allow-listed callable; items: its arguments
  };

  Kind kind = Kind::kNone;
  int64_t int_value = 0;     // kBool (0 or 1), kInt
  double float_value = 0.0;  // kFloat
  std::string text;          // kString, kBytes; kGlobal and kReduced: the module
  std::string name;          // kGlobal and kReduced: the attribute name
  std::vector<PickleValuePtr> items;
  std::vector<std::pair<PickleValuePtr, PickleValuePtr>> entries;
  int depth = 1;  // nesting depth of this value (leaves are 1), bounded by kMaxPickleDepth

  bool is(Kind k) const { return kind == k; }
  bool is_global(std::string_view module, std::string_view global_name) const {
    return (kind == Kind::kGlobal || kind == Kind::kReduced) && text == module &&
           name == global_name;
  }
};

// What a pickle may name. `callables` may be applied with REDUCE; `constants` may only be
// referenced (e.g. torch.FloatStorage inside a persistent id). Both match module and name exactly.
struct UnpicklePolicy {
  std::vector<std::pair<std::string, std::string>> callables;
  std::vector<std::pair<std::string, std::string>> constants;
};

// Bounds on hostile input; a tensor state dict needs depth ~8.
inline constexpr int kMaxPickleDepth = 64;
inline constexpr size_t kMaxPickleStack = 1u << 20;
inline constexpr size_t kMaxPickleMemo = 1u << 24;

// Runs `bytes` (protocol 2, and the few protocol 3-4 opcodes a newer writer may use) to STOP.
Result<PickleValuePtr> unpickle(std::span<const uint8_t> bytes, const UnpicklePolicy& policy);

}  // namespace lm
