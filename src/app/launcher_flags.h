// Binds TGI's launcher flags and their environment twins to LauncherArgs (a command-line flag
// wins over the environment, as with clap's `env`), and resolves --device.
#pragma once

#include <string>

#include "app/launcher_args.h"
#include "base/result.h"

namespace CLI {
class App;
}

namespace lm {

void add_launcher_flags(CLI::App& app, LauncherArgs& args);

// Adds --device (env DEVICE): cpu, cuda or auto (the default).
void add_device_flag(CLI::App& app, std::string& device);

// The device the model runs on for a --device value, given whether this binary was built with
// CUDA and how many CUDA devices are visible. The model forward runs on the CPU only for now, so
// the answer is "cpu" or an error saying why cuda cannot be used; `note` says what `auto` chose
// and why (to be logged).
Result<std::string> resolve_device(const std::string& requested, bool built_with_cuda,
                                   int num_cuda_devices, std::string& note);

// resolve_device for this binary and this machine.
Result<std::string> resolve_device(const std::string& requested, std::string& note);

}  // namespace lm
