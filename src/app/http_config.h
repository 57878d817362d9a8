// The HTTP server's settings from the launcher's flags: address, body limit, the waits on slow or
// stalled clients, and the open-connection cap. Every connection is a file descriptor, so the
// cap's default is derived from RLIMIT_NOFILE (as HAProxy derives its maxconn from `ulimit -n`).
#pragma once

#include <cstdint>

#include "app/launcher_args.h"
#include "server/transport/http_server.h"

namespace lm {

// The cap when --max-connections is unset: half the descriptor limit (the other half for the
// model files, the engine, logs and connections being refused), at most this many (an idle
// connection holds ~10 KiB of buffers).
inline constexpr int64_t kMaxDefaultConnections = 10000;
int64_t default_max_connections(uint64_t fd_limit);

// Raises the soft RLIMIT_NOFILE to the hard limit (as Go's runtime does at start; Debian's soft
// default of 1024 would cap a server at a few hundred clients) and returns the soft limit in
// force afterwards.
uint64_t raise_fd_limit();

// `fd_limit` sizes the default cap (raise_fd_limit()'s answer).
HttpServerConfig http_server_config(const LauncherArgs& args, uint64_t fd_limit);

}  // namespace lm
