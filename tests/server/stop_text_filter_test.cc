#include "server/text/stop_text_filter.h"

#include <gtest/gtest.h>

namespace lm {
namespace {

TEST(StopTextFilter, HoldsBackPrefixesAndExcludesTheStop) {
  StopTextFilter f({"</answer>"});
  EXPECT_EQ(f.push("The answer is 4<").text, "The answer is 4");
  EXPECT_EQ(f.push("/ans").text, "");
  auto out = f.push("wer> trailing");
  EXPECT_TRUE(out.stopped);
  EXPECT_EQ(out.text, "");
  EXPECT_EQ(f.released(), "The answer is 4");
  EXPECT_EQ(f.finish(), "");
  EXPECT_TRUE(f.push("more").stopped);
}

TEST(StopTextFilter, ReleasesARuledOutPrefix) {
  StopTextFilter f({"stop"});
  EXPECT_EQ(f.push("sto").text, "");
  EXPECT_EQ(f.push("ck").text, "stock");
  EXPECT_EQ(f.push("st").text, "");
  EXPECT_EQ(f.finish(), "st");
  EXPECT_EQ(f.released(), "stockst");
}

TEST(StopTextFilter, EarliestOfOverlappingStopsWins) {
  StopTextFilter f({"c", "bcd"});
  auto out = f.push("xxab");
  EXPECT_EQ(out.text, "xxa");  // "b" may begin "bcd"
  out = f.push("cdef");
  EXPECT_TRUE(out.stopped);
  EXPECT_EQ(out.text, "");  // "bcd" starts before "c"
  EXPECT_EQ(f.released(), "xxa");
  StopTextFilter g({"bcd", "abcdef"});
  g.push("xxab");
  EXPECT_EQ(g.push("cdef").text, "");
  EXPECT_EQ(g.released(), "xx");
}

TEST(StopTextFilter, StopInTheFirstTokenShowsNothing) {
  StopTextFilter f({"Hello"});
  auto out = f.push("Hello world");
  EXPECT_TRUE(out.stopped);
  EXPECT_EQ(out.text, "");
  EXPECT_EQ(f.released(), "");
}

TEST(StopTextFilter, NeverCutsInsideACharacter) {
  StopTextFilter f({"\xC3\xA9t\xC3\xA9"});  // "été"
  // "caf" + "é" + "t": the pending tail "ét" begins at a character boundary.
  EXPECT_EQ(f.push("caf\xC3\xA9").text, "caf");
  EXPECT_EQ(f.push("t").text, "");
  EXPECT_EQ(f.push("!").text, "\xC3\xA9t!");
}

TEST(StopTextFilter, NoStopsPassEverything) {
  StopTextFilter f({"", ""});
  EXPECT_EQ(f.push("abc").text, "abc");
  EXPECT_FALSE(f.push("def").stopped);
  EXPECT_EQ(f.finish(), "");
}

}  // namespace
}  // namespace lm
