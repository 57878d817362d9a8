// The log level from TGI's LOG_LEVEL (or RUST_LOG): the shorthands trace/debug/info/warn/error,
// or a tracing EnvFilter directive list such as "info,text_generation_router=debug", which
// maps to the most verbose level it names (we log as one target).
#pragma once

#include <optional>
#include <string_view>

#include "base/log.h"

namespace lm {

// nullopt when the value names no level we know (the caller keeps info and says so).
std::optional<LogLevel> parse_log_level(std::string_view value);

}  // namespace lm
