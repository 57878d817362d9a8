// text-generation-launcher: TGI's launcher command. Without a subcommand it serves the model over
// TGI's HTTP API (flags and environment variables as TGI's); `generate` completes one prompt;
// `download-weights` fetches a Hub model into the cache.
#include <CLI/CLI.hpp>
#include <csignal>

#include "app/download_command.h"
#include "app/generate_command.h"
#include "app/launcher_flags.h"
#include "app/serve_command.h"
#include "server/tgi/info_response.h"

int main(int argc, char** argv) {
  lm::block_termination_signals();
  // A file-size limit (ulimit -f) reached while weights are downloaded or converted: the write
  // fails with EFBIG and the error names the file, instead of SIGXFSZ killing the process.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{
      "text-generation-launcher: a C++ drop-in for Hugging Face text-generation-inference"};
  app.require_subcommand(0, 1);
  // TGI's -V/--version; the version is the TGI release whose API we serve (/info says the same).
  app.set_version_flag("-V,--version", "text-generation-launcher " +
                                           std::string(lm::kRouterVersion) + " (lm-infer)");
  lm::LauncherArgs args;
  lm::add_launcher_flags(app, args);
  lm::add_generate_command(app);
  lm::add_download_command(app);
  int exit_code = 0;
  app.callback([&] {
    if (app.get_subcommands().empty()) exit_code = lm::run_server(args);
  });
  CLI11_PARSE(app, argc, argv);
  return exit_code;
}
