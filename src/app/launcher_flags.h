// Binds TGI's launcher flags and their environment twins to LauncherArgs (a command-line flag
// wins over the environment, as with clap's `env`).
#pragma once

#include "server/launcher_args.h"

namespace CLI {
class App;
}

namespace lm {

void add_launcher_flags(CLI::App& app, LauncherArgs& args);

}  // namespace lm
