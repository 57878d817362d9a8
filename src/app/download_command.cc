#include "app/download_command.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include "app/model_files.h"
#include "base/log.h"

namespace lm {
namespace {

struct DownloadOptions {
  ModelFilesRequest files;
  std::string extension = ".safetensors";
  std::string logger_level = "INFO";
  bool json_output = false;
  bool trust_remote_code = false;
  bool merge_lora = false;
};

int run_download(const DownloadOptions& o) {
  set_json_logs(o.json_output);
  if (o.logger_level == "DEBUG" || o.logger_level == "debug") set_log_level(LogLevel::kDebug);
  if (o.logger_level == "WARNING" || o.logger_level == "warn") set_log_level(LogLevel::kWarn);
  if (o.logger_level == "ERROR" || o.logger_level == "error") set_log_level(LogLevel::kError);
  if (o.extension != ".safetensors") {
    log_error("--extension " + o.extension + " is not supported: weights are safetensors");
    return 1;
  }
  if (o.merge_lora) {
    log_error("--merge-lora is not supported: LoRA adapters are not built");
    return 1;
  }
  auto model = find_model_files(o.files);
  if (!model.ok()) {
    log_error(model.error().message);
    return 1;
  }
  log_info(fmt::format("Model files of {} are in {}{}", o.files.model_id, model->path,
                       model->commit_sha ? " (commit " + *model->commit_sha + ")" : ""));
  return 0;
}

}  // namespace

void add_download_command(CLI::App& app) {
  auto options = std::make_shared<DownloadOptions>();
  CLI::App* cmd = app.add_subcommand(
      "download-weights", "Download a Hub model's config, tokenizer and weights into the cache");
  cmd->add_option("model_id", options->files.model_id,
                  "Hub id (org/name, or org/name:QUANT for a GGUF repository) or local folder")
      ->required();
  cmd->add_option("--revision", options->files.revision, "Branch, tag, commit or refs/pr/N");
  cmd->add_option("--gguf-file", options->files.gguf_file,
                  "The GGUF file of the repository to fetch (all shards of a split model)")
      ->envname("GGUF_FILE");
  cmd->add_option("--huggingface-hub-cache", options->files.huggingface_hub_cache,
                  "Hub cache folder")
      ->envname("HUGGINGFACE_HUB_CACHE");
  cmd->add_option("--weights-cache-override", options->files.weights_cache_override,
                  "A folder holding the model files, used instead of the Hub cache")
      ->envname("WEIGHTS_CACHE_OVERRIDE");
  cmd->add_option("--extension", options->extension, "Weight file extension (.safetensors)")
      ->capture_default_str();
  cmd->add_option("--logger-level", options->logger_level, "DEBUG, INFO, WARNING or ERROR")
      ->capture_default_str();
  cmd->add_flag("--json-output", options->json_output, "One JSON object per log line");
  cmd->add_flag("--trust-remote-code", options->trust_remote_code,
                "Accepted; no remote code is ever run");
  cmd->add_flag("--merge-lora", options->merge_lora, "Merge a LoRA adapter (refused: not built)");
  cmd->callback([options] { std::exit(run_download(*options)); });
}

}  // namespace lm
