// text-generation-launcher: TGI's launcher command. Today it offers `generate` (one completion
// from the command line); serving over HTTP comes with the server.
#include <CLI/CLI.hpp>

#include "app/generate_command.h"
#include "base/log.h"

int main(int argc, char** argv) {
  CLI::App app{
      "text-generation-launcher: a C++ drop-in for Hugging Face text-generation-inference"};
  app.require_subcommand(1);
  lm::add_generate_command(app);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
