// What the launcher's flag and argument tests share: parsing an argv with the real flag set, and
// the message of the argument checks.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "app/launcher_args.h"
#include "app/launcher_flags.h"

namespace lm::testing_app {

// Parses argv with the launcher's flags; returns the error text, empty on success.
inline std::string parse(std::vector<std::string> argv, LauncherArgs& args) {
  CLI::App app{"test"};
  add_launcher_flags(app, args);
  argv.insert(argv.begin(), "text-generation-launcher");
  std::vector<const char*> raw;
  for (const std::string& a : argv) raw.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(raw.size()), raw.data());
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

// check_launcher_args' message, empty when the arguments pass.
inline std::string check_error(const LauncherArgs& a) {
  auto r = check_launcher_args(a);
  return r.ok() ? "" : r.error().message;
}

}  // namespace lm::testing_app
