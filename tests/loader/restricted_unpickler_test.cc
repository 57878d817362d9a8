#include "loader/restricted_unpickler.h"

#include <gtest/gtest.h>

#include <string>

#include "loader/torch_checkpoint.h"
#include "zip_builder.h"

namespace lm {
namespace {

namespace pk = testing::pk;
using namespace std::string_literals;
using Kind = PickleValue::Kind;

Result<PickleValuePtr> run(const std::string& pickle) {
  return unpickle({reinterpret_cast<const uint8_t*>(pickle.data()), pickle.size()},
                  torch_state_dict_policy());
}

std::string error_of(const std::string& pickle) {
  auto r = run(pickle);
  return r.ok() ? "" : r.error().message;
}

TEST(RestrictedUnpickler, ReadsPlainValues) {
  const std::string pickle = pk::proto() + pk::kMark + "N" + "\x88" + pk::kFalse + pk::int1(200) +
                             "M\x34\x12" + pk::binint(-5) + "\x8a\x02\x00\x80"s +
                             "\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f" +
                             "G\x40\x09\x21\xfb\x54\x44\x2d\x18" + pk::str("h\xc3\xa9") +
                             "\x8c\x02hi" + "C\x02\x00\xff"s + "U\x01s" + pk::kTuple + pk::kStop;
  auto r = run(pickle);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const PickleValue& t = **r;
  ASSERT_TRUE(t.is(Kind::kTuple));
  ASSERT_EQ(t.items.size(), 13u);
  EXPECT_TRUE(t.items[0]->is(Kind::kNone));
  EXPECT_EQ(t.items[1]->int_value, 1);
  EXPECT_EQ(t.items[2]->int_value, 0);
  EXPECT_EQ(t.items[3]->int_value, 200);
  EXPECT_EQ(t.items[4]->int_value, 0x1234);
  EXPECT_EQ(t.items[5]->int_value, -5);
  EXPECT_EQ(t.items[6]->int_value, -32768);  // LONG1 sign-extends
  EXPECT_EQ(t.items[7]->int_value, INT64_MAX);
  EXPECT_DOUBLE_EQ(t.items[8]->float_value, 3.141592653589793);
  EXPECT_EQ(t.items[9]->text, "h\xc3\xa9");
  EXPECT_EQ(t.items[10]->text, "hi");
  EXPECT_TRUE(t.items[11]->is(Kind::kBytes));
  EXPECT_EQ(t.items[11]->text, "\x00\xff"s);
  EXPECT_EQ(t.items[12]->text, "s");
}

TEST(RestrictedUnpickler, ReadsAStateDictWithMemoAndBuild) {
  // OrderedDict() memoized, a tensor, a second name fetching the same tensor from the memo, and
  // BUILD of the OrderedDict's _metadata as a module's state_dict() carries it.
  const std::string tensor = pk::tensor("0", 4, 0, {2, 2}, {2, 1});
  const std::string pickle = pk::proto() + pk::ordered_dict() + pk::put(0) + pk::kMark +
                             pk::str("a") + tensor + pk::put(1) + pk::str("b") + pk::get(1) +
                             pk::kSetItems + "}" + pk::str("_metadata") + pk::ordered_dict() + "s" +
                             "b" + pk::kStop;
  auto r = run(pickle);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const PickleValue& dict = **r;
  ASSERT_TRUE(dict.is(Kind::kDict));
  ASSERT_EQ(dict.entries.size(), 2u);
  EXPECT_EQ(dict.entries[0].first->text, "a");
  const PickleValue& a = *dict.entries[0].second;
  EXPECT_TRUE(a.is_global("torch._utils", "_rebuild_tensor_v2"));
  ASSERT_EQ(a.items.size(), 6u);
  ASSERT_TRUE(a.items[0]->is(Kind::kPersistentId));
  EXPECT_TRUE(a.items[0]->items[0]->items[1]->is_global("torch", "FloatStorage"));
  EXPECT_EQ(dict.entries[1].second, dict.entries[0].second);  // the same object
}

TEST(RestrictedUnpickler, RefusesGlobalsOutsideTheAllowList) {
  EXPECT_NE(error_of(pk::proto() + pk::global("posix", "system") + pk::str("touch /tmp/x") +
                     pk::kTuple1 + pk::kReduce + pk::kStop)
                .find("refusing global 'posix.system'"),
            std::string::npos);
  EXPECT_NE(error_of("cbuiltins\neval\n.").find("'builtins.eval'"), std::string::npos);
  EXPECT_NE(error_of("c__builtin__\ngetattr\n.").find("'__builtin__.getattr'"), std::string::npos);
  EXPECT_NE(error_of(pk::str("os") + pk::str("system") + "\x93.").find("'os.system'"),
            std::string::npos);
  // Module and name must match exactly: no dotted lookups through an allowed module.
  EXPECT_NE(error_of(pk::global("torch", "_utils._rebuild_tensor_v2") + pk::kStop), "");
  EXPECT_NE(error_of(pk::global("collections", "OrderedDict.__new__") + pk::kStop), "");
}

TEST(RestrictedUnpickler, AppliesOnlyAllowListedCallables) {
  // Storage classes may be named but not called.
  EXPECT_NE(
      error_of(pk::global("torch", "FloatStorage") + pk::kEmptyTuple + pk::kReduce + pk::kStop)
          .find("'torch.FloatStorage', which may not be called"),
      std::string::npos);
  EXPECT_NE(error_of(pk::str("x") + pk::kEmptyTuple + pk::kReduce + pk::kStop).find("not a global"),
            std::string::npos);
  EXPECT_NE(
      error_of(pk::global("collections", "OrderedDict") + pk::int1(1) + pk::kReduce + pk::kStop)
          .find("not a tuple"),
      std::string::npos);
  EXPECT_NE(error_of(pk::global("collections", "OrderedDict") + "]" + pk::kTuple1 + pk::kReduce +
                     pk::kStop)
                .find("OrderedDict called with arguments"),
            std::string::npos);
  // BUILD may only drop state on a dict or a rebuilt object, never on a global.
  EXPECT_NE(error_of(pk::global("torch", "FloatStorage") + "}" + "b" + pk::kStop), "");
}

TEST(RestrictedUnpickler, RefusesOpcodesAStateDictDoesNotUse) {
  EXPECT_NE(error_of("(i__main__\nX\n.").find("INST"), std::string::npos);
  EXPECT_NE(error_of(pk::proto() + "\x81.").find("NEWOBJ"), std::string::npos);
  EXPECT_NE(error_of(pk::proto() + "\x92.").find("NEWOBJ_EX"), std::string::npos);
  EXPECT_NE(error_of("(o.").find("OBJ"), std::string::npos);
  EXPECT_NE(error_of("\x82\x01.").find("EXT"), std::string::npos);
  EXPECT_NE(error_of("S'x'\n.").find("STRING"), std::string::npos);
  EXPECT_NE(error_of("P0\n.").find("PERSID"), std::string::npos);
  EXPECT_NE(error_of("N2.").find("DUP"), std::string::npos);
  EXPECT_NE(error_of("\xff").find("opcode 0xff (unknown)"), std::string::npos);
  EXPECT_NE(error_of("\x80\x06.").find("protocol 6"), std::string::npos);
}

TEST(RestrictedUnpickler, RefusesMalformedStacks) {
  EXPECT_NE(error_of(".").find("underflow"), std::string::npos);
  EXPECT_NE(error_of("t.").find("no MARK"), std::string::npos);
  EXPECT_NE(error_of("R.").find("underflow"), std::string::npos);
  EXPECT_NE(error_of("N(R.").find("underflow"), std::string::npos);  // a MARK fences the stack
  EXPECT_NE(error_of("NNNs.").find("not a dict"), std::string::npos);
  EXPECT_NE(error_of("}NNNu.").find("no MARK"), std::string::npos);
  EXPECT_NE(error_of("}(Nu.").find("odd number"), std::string::npos);
  EXPECT_NE(error_of("NNa.").find("not a list"), std::string::npos);
  EXPECT_NE(error_of("h\x05.").find("memo key 5 is unset"), std::string::npos);
  EXPECT_NE(error_of("q\x00."s).find("underflow"), std::string::npos);
  EXPECT_NE(error_of("X\x02\x00\x00\x00\xc3\x28."s).find("not valid UTF-8"), std::string::npos);
  EXPECT_NE(error_of("\x8a\x09" + std::string(9, '\x01') + ".").find("integer of 9 bytes"),
            std::string::npos);
  EXPECT_NE(error_of("T\xff\xff\xff\xff.").find("negative"), std::string::npos);
  EXPECT_NE(error_of("X\xff\xff\xff\x7f").find("truncated"), std::string::npos);
}

TEST(RestrictedUnpickler, RefusesSharedMutableContainers) {
  // A list appended to itself would be a cycle; dicts and lists are never fetched from the memo.
  EXPECT_NE(error_of("]q\x00h\x00"s
                     "a.")
                .find("memo reference to a list or dict"),
            std::string::npos);
  EXPECT_NE(error_of("}q\x00(h\x00"s
                     "N"
                     "u.")
                .find("memo reference to a list or dict"),
            std::string::npos);
  // Immutable values may be shared: LONG_BINPUT / LONG_BINGET / MEMOIZE of a tuple.
  auto r = run(")r\x07\x00\x00\x00j\x07\x00\x00\x00\x94h\x01\x86."s);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ((*r)->items.size(), 2u);
}

TEST(RestrictedUnpickler, BoundsNesting) {
  std::string deep = ")";
  for (int i = 0; i < 100; ++i) deep += pk::kTuple1;
  EXPECT_NE(error_of(deep + ".").find("deeper than 64"), std::string::npos);
  std::string ok = ")";
  for (int i = 0; i < 60; ++i) ok += pk::kTuple1;
  EXPECT_TRUE(run(ok + ".").ok());
  EXPECT_NE(error_of(std::string(300, '(') + ".").find("too many nested MARKs"), std::string::npos);
  // Deep nesting through lists and dicts is bounded the same way.
  std::string lists = "]";
  for (int i = 0; i < 100; ++i) lists = "]" + lists + "a";
  EXPECT_NE(error_of(lists + ".").find("deeper than"), std::string::npos);
}

TEST(RestrictedUnpickler, RefusesEveryTruncation) {
  const std::string pickle = pk::state_dict({{"w", pk::tensor("0", 4, 0, {4}, {1})}});
  ASSERT_TRUE(run(pickle).ok());
  for (size_t n = 0; n < pickle.size(); ++n) {
    EXPECT_NE(error_of(pickle.substr(0, n)), "") << "prefix of " << n << " bytes ran";
  }
}

TEST(RestrictedUnpickler, SurvivesEverySingleByteCorruption) {
  const std::string pickle = pk::state_dict(
      {{"w", pk::tensor("0", 4, 0, {2, 2}, {2, 1})}, {"v", pk::tensor("1", 8, 2, {3}, {2})}});
  for (size_t i = 0; i < pickle.size(); ++i) {
    for (int value : {0x00, 0x01, 0x7f, 0x80, 0xff, int{'('}, int{'t'}, int{'h'}, int{'R'}}) {
      std::string corrupt = pickle;
      corrupt[i] = static_cast<char>(value);
      (void)run(corrupt);  // any result is fine; this must not crash or hang
    }
  }
}

}  // namespace
}  // namespace lm
