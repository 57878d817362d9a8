#include "app/model_files.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>

#include <chrono>

#include "base/log.h"
#include "base/text_file.h"
#include "hub/hub_options.h"
#include "loader/bin_conversion.h"
#include "loader/gguf_file.h"
#include "tokenizer/gguf_vocab_reader.h"
#include "tokenizer/tokenizer_config.h"

namespace lm {
namespace {

// The launcher blocks SIGINT/SIGTERM for its sigwait; a download can take long, so while it runs
// they end the process as usual (finished blobs stay, .incomplete files resume next time).
class TerminationSignalsAllowed {
 public:
  TerminationSignalsAllowed() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_UNBLOCK, &set, &previous_);
  }
  ~TerminationSignalsAllowed() { pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }
  TerminationSignalsAllowed(const TerminationSignalsAllowed&) = delete;
  TerminationSignalsAllowed& operator=(const TerminationSignalsAllowed&) = delete;

 private:
  sigset_t previous_;
};

}  // namespace

Result<hub::ResolvedModel> find_model_files(const ModelFilesRequest& request) {
  const hub::HubOptions options = hub::hub_options_from_env(request.huggingface_hub_cache);
  TerminationSignalsAllowed signals_allowed;
  LM_ASSIGN_OR_RETURN(hub::ResolvedModel model,
                      hub::resolve_model({request.model_id, request.revision,
                                          request.weights_cache_override, request.gguf_file},
                                         options));
  // A model with only PyTorch .bin weights: converted once to safetensors beside them (as TGI's
  // download-weights does), by our own reader that never runs anything in a pickle.
  if (!model.pytorch_files.empty()) {
    log_info(fmt::format(
        "No safetensors weights found for model {}. Converting PyTorch weights to safetensors.",
        request.model_id));
    const auto start = std::chrono::steady_clock::now();
    LM_ASSIGN_OR_RETURN(auto written, convert_bin_checkpoints(model.path));
    log_info(fmt::format(
        "Converted {} PyTorch file(s) to {} in {:.1f}s", model.pytorch_files.size(),
        fmt::join(written, ", "),
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()));
  }
  return model;
}

Result<std::unique_ptr<Tokenizer>> load_tokenizer_for(const std::string& model_path,
                                                      const LlamaModel& model) {
  if (model.gguf()) {
    LM_ASSIGN_OR_RETURN(GgufVocab vocab, read_gguf_vocab(*model.gguf()));
    return Tokenizer::from_gguf_vocab(vocab);
  }
  const std::string json_path = model_path + "/tokenizer.json";
  if (!file_exists(json_path)) return Error{model_path + ": no tokenizer.json"};
  LM_ASSIGN_OR_RETURN(std::string json, read_text_file(json_path));
  LM_ASSIGN_OR_RETURN(std::string config, read_model_tokenizer_config(model_path));
  auto tokenizer = Tokenizer::from_json_strings(json, config);
  if (!tokenizer.ok()) return Error{json_path + ": " + tokenizer.error().message};
  return tokenizer;
}

}  // namespace lm
