// `text-generation-launcher generate`: load a model, complete one prompt, stream the text to
// stdout. For trying the engine without the server.
#pragma once

namespace CLI {
class App;
}

namespace lm {

void add_generate_command(CLI::App& app);

}  // namespace lm
