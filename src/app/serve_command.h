// Serving: load the model, derive the limits, warm up, start the engine and the HTTP server,
// then wait for SIGINT/SIGTERM and drain (TGI's router behaviour behind the launcher's flags).
#pragma once

#include "app/launcher_args.h"

namespace lm {

// Blocks SIGINT/SIGTERM in the calling thread; call first in main, before any thread starts, so
// every thread inherits the mask and run_server can sigwait for them.
void block_termination_signals();

// Returns the process exit code.
int run_server(const LauncherArgs& args);

}  // namespace lm
