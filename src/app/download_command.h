// `text-generation-launcher download-weights MODEL_ID [--revision R]`: TGI's
// `text-generation-server download-weights`: fetch a Hub model into the cache (or check that a
// local folder or the cache already has it) without serving.
#pragma once

namespace CLI {
class App;
}

namespace lm {

void add_download_command(CLI::App& app);

}  // namespace lm
