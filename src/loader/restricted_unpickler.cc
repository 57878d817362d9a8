#include "loader/restricted_unpickler.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <unordered_map>

#include "base/byte_reader.h"
#include "base/utf8.h"

namespace lm {
namespace {

using Kind = PickleValue::Kind;
// Values under construction: dicts and lists are filled while on the stack.
using MutableValue = std::shared_ptr<PickleValue>;

constexpr size_t kMaxMarks = 256;
constexpr size_t kMaxGlobalNameBytes = 256;

// Names of the opcodes we refuse, so the error says what the pickle tried to do.
const char* opcode_name(uint8_t op) {
  switch (op) {
    case 'i':
      return "INST";
    case 'o':
      return "OBJ";
    case 0x81:
      return "NEWOBJ";
    case 0x92:
      return "NEWOBJ_EX";
    case 0x82:
    case 0x83:
    case 0x84:
      return "EXT";
    case 'P':
      return "PERSID";
    case 'I':
      return "INT";
    case 'L':
      return "LONG";
    case 'F':
      return "FLOAT";
    case 'S':
      return "STRING";
    case 'V':
      return "UNICODE";
    case 'p':
      return "PUT";
    case 'g':
      return "GET";
    case '0':
      return "POP";
    case '1':
      return "POP_MARK";
    case '2':
      return "DUP";
    case 0x8f:
      return "EMPTY_SET";
    case 0x90:
      return "ADDITEMS";
    case 0x91:
      return "FROZENSET";
    case 0x96:
      return "BYTEARRAY8";
    case 0x97:
      return "NEXT_BUFFER";
    case 0x98:
      return "READONLY_BUFFER";
    default:
      return "unknown";
  }
}

std::string hex_byte(uint8_t b) {
  static const char* digits = "0123456789abcdef";
  return std::string("0x") + digits[b >> 4] + digits[b & 15];
}

class Machine {
 public:
  Machine(std::span<const uint8_t> bytes, const UnpicklePolicy& policy)
      : reader_(bytes), policy_(policy) {}

  Result<PickleValuePtr> run() {
    while (true) {
      op_offset_ = reader_.offset();
      auto op = reader_.read<uint8_t>();
      if (!op.ok()) return fail_here("pickle ends without a STOP opcode (truncated)");
      if (*op == '.') {
        LM_ASSIGN_OR_RETURN(MutableValue result, pop());
        return PickleValuePtr(std::move(result));
      }
      LM_RETURN_IF_ERROR(step(*op));
    }
  }

 private:
  Error fail_here(const std::string& what) const {
    return Error{"pickle offset " + std::to_string(op_offset_) + ": " + what};
  }

  // Truncation inside an opcode's argument reads as one clear message.
  template <typename T>
  Result<T> arg() {
    auto v = reader_.read<T>();
    if (!v.ok()) return fail_here("opcode argument is truncated");
    return *v;
  }
  Result<std::string> arg_bytes(uint64_t length) {
    auto v = reader_.read_string(length);
    if (!v.ok()) return fail_here("string of " + std::to_string(length) + " bytes is truncated");
    return std::move(v).value();
  }
  Result<std::string> arg_line() {
    std::string line;
    while (true) {
      LM_ASSIGN_OR_RETURN(uint8_t c, arg<uint8_t>());
      if (c == '\n') return line;
      if (line.size() >= kMaxGlobalNameBytes) return fail_here("GLOBAL name is too long");
      line.push_back(static_cast<char>(c));
    }
  }

  Status push(MutableValue v) {
    if (stack_.size() >= kMaxPickleStack) return fail_here("stack exceeds its limit");
    stack_.push_back(std::move(v));
    return {};
  }
  Result<MutableValue> pop() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) {
      return fail_here("stack underflow");
    }
    MutableValue v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  // Everything pushed since the last MARK, which is removed.
  Result<std::vector<MutableValue>> pop_mark() {
    if (marks_.empty()) return fail_here("no MARK to pop to");
    const size_t base = marks_.back();
    marks_.pop_back();
    std::vector<MutableValue> items(std::make_move_iterator(stack_.begin() + base),
                                    std::make_move_iterator(stack_.end()));
    stack_.resize(base);
    return items;
  }
  Result<MutableValue*> top() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) {
      return fail_here("stack underflow");
    }
    return &stack_.back();
  }

  static MutableValue leaf(Kind kind) {
    auto v = std::make_shared<PickleValue>();
    v->kind = kind;
    return v;
  }
  // Raises `parent`'s depth to cover `child`, refusing nesting past kMaxPickleDepth (which also
  // keeps the recursive destructor of the tree shallow).
  Status adopt_depth(PickleValue& parent, const PickleValue& child) {
    parent.depth = std::max(parent.depth, child.depth + 1);
    if (parent.depth > kMaxPickleDepth) {
      return fail_here("values nest deeper than " + std::to_string(kMaxPickleDepth) + " levels");
    }
    return {};
  }
  Result<MutableValue> make_tuple(std::vector<MutableValue> items) {
    MutableValue t = leaf(Kind::kTuple);
    for (auto& item : items) {
      LM_RETURN_IF_ERROR(adopt_depth(*t, *item));
      t->items.push_back(std::move(item));
    }
    return t;
  }
  Status append_items(std::vector<MutableValue> items) {
    LM_ASSIGN_OR_RETURN(MutableValue * list, top());
    if (!(*list)->is(Kind::kList)) return fail_here("APPEND(S) to something that is not a list");
    for (auto& item : items) {
      LM_RETURN_IF_ERROR(adopt_depth(**list, *item));
      (*list)->items.push_back(std::move(item));
    }
    return {};
  }
  Status set_items(std::vector<MutableValue> items) {
    if (items.size() % 2 != 0) return fail_here("SETITEMS with an odd number of values");
    LM_ASSIGN_OR_RETURN(MutableValue * dict, top());
    if (!(*dict)->is(Kind::kDict)) return fail_here("SETITEM(S) on something that is not a dict");
    for (size_t i = 0; i < items.size(); i += 2) {
      LM_RETURN_IF_ERROR(adopt_depth(**dict, *items[i]));
      LM_RETURN_IF_ERROR(adopt_depth(**dict, *items[i + 1]));
      (*dict)->entries.emplace_back(std::move(items[i]), std::move(items[i + 1]));
    }
    return {};
  }

  Status push_int(int64_t value) {
    MutableValue v = leaf(Kind::kInt);
    v->int_value = value;
    return push(std::move(v));
  }
  Status push_text(Kind kind, std::string text) {
    if (kind == Kind::kString && !is_valid_utf8(text)) {
      return fail_here("string is not valid UTF-8");
    }
    MutableValue v = leaf(kind);
    v->text = std::move(text);
    return push(std::move(v));
  }
  // LONG1/LONG4: little-endian two's complement; a state dict never needs more than 64 bits.
  Status push_long(uint64_t num_bytes) {
    if (num_bytes > 8) return fail_here("integer of " + std::to_string(num_bytes) + " bytes");
    LM_ASSIGN_OR_RETURN(std::string raw, arg_bytes(num_bytes));
    uint64_t bits = 0;
    for (size_t i = 0; i < raw.size(); ++i)
      bits |= uint64_t{static_cast<uint8_t>(raw[i])} << (8 * i);
    if (!raw.empty() && raw.size() < 8 && (static_cast<uint8_t>(raw.back()) & 0x80)) {
      bits |= ~uint64_t{0} << (8 * raw.size());  // sign-extend
    }
    return push_int(static_cast<int64_t>(bits));
  }

  bool listed(const std::vector<std::pair<std::string, std::string>>& names,
              const std::string& module, const std::string& name) const {
    return std::find(names.begin(), names.end(), std::make_pair(module, name)) != names.end();
  }
  Status push_global(std::string module, std::string name) {
    if (!listed(policy_.callables, module, name) && !listed(policy_.constants, module, name)) {
      return fail_here("refusing global '" + module + "." + name +
                       "': not a name a tensor state dict uses (nothing in the pickle is run)");
    }
    MutableValue v = leaf(Kind::kGlobal);
    v->text = std::move(module);
    v->name = std::move(name);
    return push(std::move(v));
  }

  Status reduce() {
    LM_ASSIGN_OR_RETURN(MutableValue args, pop());
    LM_ASSIGN_OR_RETURN(MutableValue callable, pop());
    if (!callable->is(Kind::kGlobal) ||
        !listed(policy_.callables, callable->text, callable->name)) {
      const std::string what = callable->is(Kind::kGlobal)
                                   ? "'" + callable->text + "." + callable->name + "'"
                                   : "a value that is not a global";
      return fail_here("REDUCE applies " + what + ", which may not be called");
    }
    if (!args->is(Kind::kTuple)) return fail_here("REDUCE arguments are not a tuple");
    if (callable->is_global("collections", "OrderedDict")) {
      if (!args->items.empty()) return fail_here("OrderedDict called with arguments");
      return push(leaf(Kind::kDict));
    }
    MutableValue v = leaf(Kind::kReduced);
    v->text = callable->text;
    v->name = callable->name;
    v->depth = args->depth;
    v->items = std::move(args->items);
    return push(std::move(v));
  }

  // BUILD sets an object's state (OrderedDict attributes such as _metadata, tensor extras).
  // Nothing needs them, so the state is dropped once parsed.
  Status build() {
    LM_ASSIGN_OR_RETURN(MutableValue state, pop());
    LM_ASSIGN_OR_RETURN(MutableValue * target, top());
    if (!(*target)->is(Kind::kDict) && !(*target)->is(Kind::kReduced)) {
      return fail_here("BUILD on a value that is not a dict or a rebuilt object");
    }
    return {};
  }

  Status memo_put(uint64_t index) {
    LM_ASSIGN_OR_RETURN(MutableValue * value, top());
    if (memo_.size() >= kMaxPickleMemo && !memo_.count(index)) {
      return fail_here("memo exceeds its limit");
    }
    memo_[index] = *value;
    return {};
  }
  Status memo_get(uint64_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end()) return fail_here("memo key " + std::to_string(index) + " is unset");
    // Lists and dicts are mutable: fetching one again could put it inside itself (a cycle) or
    // change it after a parent measured its depth. A state dict never shares them.
    if (it->second->is(Kind::kList) || it->second->is(Kind::kDict)) {
      return fail_here("memo reference to a list or dict (a state dict never shares them)");
    }
    return push(it->second);
  }

  Status step(uint8_t op) {
    switch (op) {
      case 0x80: {  // PROTO
        LM_ASSIGN_OR_RETURN(uint8_t version, arg<uint8_t>());
        if (version > 5) return fail_here("unsupported pickle protocol " + std::to_string(version));
        return {};
      }
      case 0x95: {  // FRAME: only a read-ahead hint
        LM_ASSIGN_OR_RETURN(uint64_t frame_len, arg<uint64_t>());
        (void)frame_len;
        return {};
      }
      case 'c': {  // GLOBAL
        LM_ASSIGN_OR_RETURN(std::string module, arg_line());
        LM_ASSIGN_OR_RETURN(std::string name, arg_line());
        return push_global(std::move(module), std::move(name));
      }
      case 0x93: {  // STACK_GLOBAL
        LM_ASSIGN_OR_RETURN(MutableValue name, pop());
        LM_ASSIGN_OR_RETURN(MutableValue module, pop());
        if (!name->is(Kind::kString) || !module->is(Kind::kString)) {
          return fail_here("STACK_GLOBAL needs two strings");
        }
        return push_global(module->text, name->text);
      }
      case 'Q': {  // BINPERSID
        LM_ASSIGN_OR_RETURN(MutableValue pid, pop());
        MutableValue v = leaf(Kind::kPersistentId);
        LM_RETURN_IF_ERROR(adopt_depth(*v, *pid));
        v->items.push_back(std::move(pid));
        return push(std::move(v));
      }
      case 'R':
        return reduce();
      case 'b':
        return build();
      case '(':
        if (marks_.size() >= kMaxMarks) return fail_here("too many nested MARKs");
        marks_.push_back(stack_.size());
        return {};
      case '}':
        return push(leaf(Kind::kDict));
      case ']':
        return push(leaf(Kind::kList));
      case ')':
        return push(leaf(Kind::kTuple));
      case 't': {
        LM_ASSIGN_OR_RETURN(std::vector<MutableValue> items, pop_mark());
        LM_ASSIGN_OR_RETURN(MutableValue t, make_tuple(std::move(items)));
        return push(std::move(t));
      }
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1..3
        std::vector<MutableValue> items(op - 0x84);
        for (size_t i = items.size(); i-- > 0;) {
          LM_ASSIGN_OR_RETURN(items[i], pop());
        }
        LM_ASSIGN_OR_RETURN(MutableValue t, make_tuple(std::move(items)));
        return push(std::move(t));
      }
      case 'l': {  // LIST
        LM_ASSIGN_OR_RETURN(std::vector<MutableValue> items, pop_mark());
        LM_RETURN_IF_ERROR(push(leaf(Kind::kList)));
        return append_items(std::move(items));
      }
      case 'd': {  // DICT
        LM_ASSIGN_OR_RETURN(std::vector<MutableValue> items, pop_mark());
        LM_RETURN_IF_ERROR(push(leaf(Kind::kDict)));
        return set_items(std::move(items));
      }
      case 'a': {  // APPEND
        LM_ASSIGN_OR_RETURN(MutableValue item, pop());
        std::vector<MutableValue> items;
        items.push_back(std::move(item));
        return append_items(std::move(items));
      }
      case 'e': {  // APPENDS
        LM_ASSIGN_OR_RETURN(std::vector<MutableValue> items, pop_mark());
        return append_items(std::move(items));
      }
      case 's': {  // SETITEM
        LM_ASSIGN_OR_RETURN(MutableValue value, pop());
        LM_ASSIGN_OR_RETURN(MutableValue key, pop());
        std::vector<MutableValue> items;
        items.push_back(std::move(key));
        items.push_back(std::move(value));
        return set_items(std::move(items));
      }
      case 'u': {  // SETITEMS
        LM_ASSIGN_OR_RETURN(std::vector<MutableValue> items, pop_mark());
        return set_items(std::move(items));
      }
      case 'q': {  // BINPUT
        LM_ASSIGN_OR_RETURN(uint8_t index, arg<uint8_t>());
        return memo_put(index);
      }
      case 'r': {  // LONG_BINPUT
        LM_ASSIGN_OR_RETURN(uint32_t index, arg<uint32_t>());
        return memo_put(index);
      }
      case 0x94:  // MEMOIZE
        return memo_put(memo_.size());
      case 'h': {  // BINGET
        LM_ASSIGN_OR_RETURN(uint8_t index, arg<uint8_t>());
        return memo_get(index);
      }
      case 'j': {  // LONG_BINGET
        LM_ASSIGN_OR_RETURN(uint32_t index, arg<uint32_t>());
        return memo_get(index);
      }
      case 'J': {  // BININT
        LM_ASSIGN_OR_RETURN(int32_t value, arg<int32_t>());
        return push_int(value);
      }
      case 'K': {  // BININT1
        LM_ASSIGN_OR_RETURN(uint8_t value, arg<uint8_t>());
        return push_int(value);
      }
      case 'M': {  // BININT2
        LM_ASSIGN_OR_RETURN(uint16_t value, arg<uint16_t>());
        return push_int(value);
      }
      case 0x8a: {  // LONG1
        LM_ASSIGN_OR_RETURN(uint8_t num_bytes, arg<uint8_t>());
        return push_long(num_bytes);
      }
      case 0x8b: {  // LONG4
        LM_ASSIGN_OR_RETURN(uint32_t num_bytes, arg<uint32_t>());
        return push_long(num_bytes);
      }
      case 'G': {  // BINFLOAT: big-endian IEEE double
        LM_ASSIGN_OR_RETURN(uint64_t bits, arg<uint64_t>());
        MutableValue v = leaf(Kind::kFloat);
        v->float_value = std::bit_cast<double>(__builtin_bswap64(bits));
        return push(std::move(v));
      }
      case 0x88:
      case 0x89: {  // NEWTRUE, NEWFALSE
        MutableValue v = leaf(Kind::kBool);
        v->int_value = op == 0x88 ? 1 : 0;
        return push(std::move(v));
      }
      case 'N':
        return push(leaf(Kind::kNone));
      case 'X': {  // BINUNICODE
        LM_ASSIGN_OR_RETURN(uint32_t length, arg<uint32_t>());
        LM_ASSIGN_OR_RETURN(std::string text, arg_bytes(length));
        return push_text(Kind::kString, std::move(text));
      }
      case 0x8c: {  // SHORT_BINUNICODE
        LM_ASSIGN_OR_RETURN(uint8_t length, arg<uint8_t>());
        LM_ASSIGN_OR_RETURN(std::string text, arg_bytes(length));
        return push_text(Kind::kString, std::move(text));
      }
      case 0x8d: {  // BINUNICODE8
        LM_ASSIGN_OR_RETURN(uint64_t length, arg<uint64_t>());
        LM_ASSIGN_OR_RETURN(std::string text, arg_bytes(length));
        return push_text(Kind::kString, std::move(text));
      }
      case 'T': {  // BINSTRING (Python 2 str, read as text like torch.load does)
        LM_ASSIGN_OR_RETURN(int32_t length, arg<int32_t>());
        if (length < 0) return fail_here("negative BINSTRING length");
        LM_ASSIGN_OR_RETURN(std::string text, arg_bytes(static_cast<uint64_t>(length)));
        return push_text(Kind::kString, std::move(text));
      }
      case 'U': {  // SHORT_BINSTRING
        LM_ASSIGN_OR_RETURN(uint8_t length, arg<uint8_t>());
        LM_ASSIGN_OR_RETURN(std::string text, arg_bytes(length));
        return push_text(Kind::kString, std::move(text));
      }
      case 'B': {  // BINBYTES
        LM_ASSIGN_OR_RETURN(uint32_t length, arg<uint32_t>());
        LM_ASSIGN_OR_RETURN(std::string bytes, arg_bytes(length));
        return push_text(Kind::kBytes, std::move(bytes));
      }
      case 'C': {  // SHORT_BINBYTES
        LM_ASSIGN_OR_RETURN(uint8_t length, arg<uint8_t>());
        LM_ASSIGN_OR_RETURN(std::string bytes, arg_bytes(length));
        return push_text(Kind::kBytes, std::move(bytes));
      }
      case 0x8e: {  // BINBYTES8
        LM_ASSIGN_OR_RETURN(uint64_t length, arg<uint64_t>());
        LM_ASSIGN_OR_RETURN(std::string bytes, arg_bytes(length));
        return push_text(Kind::kBytes, std::move(bytes));
      }
      default:
        return fail_here("opcode " + hex_byte(op) + " (" + opcode_name(op) +
                         ") is not allowed in a tensor checkpoint");
    }
  }

  ByteReader reader_;
  const UnpicklePolicy& policy_;
  size_t op_offset_ = 0;
  std::vector<MutableValue> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, MutableValue> memo_;
};

}  // namespace

Result<PickleValuePtr> unpickle(std::span<const uint8_t> bytes, const UnpicklePolicy& policy) {
  return Machine(bytes, policy).run();
}

}  // namespace lm
