// LOG_LEVEL / RUST_LOG values as TGI's users write them: shorthands and EnvFilter directives.
#include "app/log_level.h"

#include <gtest/gtest.h>

namespace lm {
namespace {

TEST(LogLevel, ShorthandsAndDirectives) {
  EXPECT_EQ(parse_log_level("info"), LogLevel::kInfo);
  EXPECT_EQ(parse_log_level("WARN"), LogLevel::kWarn);
  EXPECT_EQ(parse_log_level("warning"), LogLevel::kWarn);
  EXPECT_EQ(parse_log_level("debug"), LogLevel::kDebug);
  EXPECT_EQ(parse_log_level("trace"), LogLevel::kDebug);  // our most verbose level
  EXPECT_EQ(parse_log_level("error"), LogLevel::kError);
  // One target at debug is enough to log at debug: we log as one target.
  EXPECT_EQ(parse_log_level("info,text_generation_router=debug"), LogLevel::kDebug);
  EXPECT_EQ(parse_log_level("text_generation_launcher=warn, text_generation_router=error"),
            LogLevel::kWarn);
  EXPECT_EQ(parse_log_level(""), std::nullopt);
  EXPECT_EQ(parse_log_level("verbose"), std::nullopt);
  EXPECT_EQ(parse_log_level("text_generation_router"), std::nullopt);
}

}  // namespace
}  // namespace lm
