#include "app/generate_command.h"

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>

#include "app/cpu_isa_flag.h"
#include "app/launcher_flags.h"
#include "app/model_files.h"
#include "base/log.h"
#include "engine/engine.h"
#include "engine/run_to_completion.h"
#include "model/weight_dtype.h"
#include "runtime/kv_pool.h"
#include "runtime/model_executor.h"
#include "runtime/request_check.h"
#include "server/text/stop_sequences.h"
#include "tokenizer/stream_decoder.h"

namespace lm {
namespace {

struct GenerateOptions {
  std::string model_id;
  std::string prompt;
  int64_t max_new_tokens = 64;
  int num_threads = 0;
  std::vector<std::string> stop;
  bool no_bos = false;
  // As the launcher's default (app/launcher_args.h): llama.cpp's int8 activation dots.
  bool int8_activations = true;
  std::optional<std::string> kv_cache_dtype;  // --kv-cache-dtype, as the launcher's
  std::string device;                         // --device, as the launcher's
  std::string cpu_isa;                        // --cpu-isa, as the launcher's
  SamplingParams sampling;
};

int run_generate(const GenerateOptions& o) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  std::string device_note;
  auto device = resolve_device(o.device, device_note);
  if (!device.ok()) {
    log_error(device.error().message);
    return 1;
  }
  // The one-shot command drives the CPU executor only; the launcher serves on the GPU.
  if (*device == "cuda") {
    if (o.device == "cuda") {
      log_error("--device cuda: the generate command runs on the CPU; serve with the launcher");
      return 1;
    }
    device_note = "Device: cpu (auto; the generate command runs on the CPU)";
  }
  if (!device_note.empty()) log_info(device_note);
  if (o.kv_cache_dtype && !parse_kv_cache_dtype(*o.kv_cache_dtype)) {
    log_error("--kv-cache-dtype " + *o.kv_cache_dtype + ": expected " +
              std::string(kKvCacheDtypeChoices));
    return 1;
  }
  auto cpu_isa = apply_cpu_isa(o.cpu_isa);
  if (!cpu_isa.ok()) {
    log_error(cpu_isa.error().message);
    return 1;
  }
  log_info(*cpu_isa);
  auto files = find_model_files({o.model_id, std::nullopt, std::nullopt, std::nullopt});
  if (!files.ok()) {
    log_error(files.error().message);
    return 1;
  }
  auto model = LlamaModel::load(files->path);
  if (!model.ok()) {
    log_error(model.error().message);
    return 1;
  }
  (*model)->set_int8_activations(o.int8_activations);
  auto tokenizer = load_tokenizer_for(files->path, **model);
  if (!tokenizer.ok()) {
    log_error(tokenizer.error().message);
    return 1;
  }
  EngineRequest request;
  request.prompt_ids = (*tokenizer)->encode(o.prompt, /*add_special_tokens=*/!o.no_bos);
  request.max_new_tokens = o.max_new_tokens;
  request.sampling = o.sampling;
  if (request.prompt_ids.empty()) {
    log_error("the prompt encodes to no tokens");
    return 1;
  }

  // Checked before the engine sizes its K/V pool for this request (an over-long one would ask
  // for memory it can never use).
  if (Status fits = check_request_fits_model((*model)->config(), request); !fits.ok()) {
    log_error(fits.error().message);
    return 1;
  }

  ThreadPool pool(o.num_threads);
  // One request: its whole prompt in one step, K/V for exactly its tokens, the model's EOS ids.
  const auto prompt_len = static_cast<int64_t>(request.prompt_ids.size());
  EngineConfig config;
  config.max_batch_prefill_tokens = prompt_len;
  config.max_batch_total_tokens = prompt_len + request.max_new_tokens;
  config.eos_token_ids = (*model)->config().eos_token_ids;
  const DType kv_dtype =
      resolve_kv_cache_dtype(o.kv_cache_dtype, o.int8_activations,
                             summarize_weights((*model)->weights()).num_quantized > 0);
  Engine engine(config, std::make_unique<ModelExecutor>(**model, pool, config, kv_dtype));
  StreamDecoder decoder(**tokenizer, request.prompt_ids, /*skip_special_tokens=*/true);
  StopSequenceMatcher stops(o.stop);
  const auto t1 = Clock::now();
  auto first_token = t1;
  // Runs on the engine thread; a matched stop string ends the request there.
  auto result = run_to_completion(engine, request, [&](const SampleResult& token) {
    if (first_token == t1) first_token = Clock::now();
    const std::string text = decoder.push(token.id);
    std::cout << text << std::flush;
    return !stops.feed(text).has_value();
  });
  engine.drain();
  if (!result.ok()) {
    log_error(result.error().message);
    return 1;
  }
  std::cout << decoder.flush() << std::endl;
  const auto t2 = Clock::now();
  const double load_s = std::chrono::duration<double>(t1 - t0).count();
  const double prefill_s = std::chrono::duration<double>(first_token - t1).count();
  const double decode_s = std::chrono::duration<double>(t2 - first_token).count();
  const size_t n = result->tokens.size();
  log_info(fmt::format(
      "finish_reason={} prompt_tokens={} generated_tokens={} load={:.2f}s prefill={:.3f}s "
      "decode={:.1f} tokens/s threads={}",
      finish_reason_name(result->finish_reason), request.prompt_ids.size(), n, load_s, prefill_s,
      n > 1 ? static_cast<double>(n - 1) / decode_s : 0.0, pool.num_threads()));
  return 0;
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto options = std::make_shared<GenerateOptions>();
  CLI::App* cmd =
      app.add_subcommand("generate", "Complete one prompt with a model and print the text");
  cmd->add_option("--model-id", options->model_id,
                  "A GGUF file, a Hugging Face model folder or a Hub repository id")
      ->required()
      ->envname("MODEL_ID");
  cmd->add_option("--prompt", options->prompt, "The text to complete")->required();
  cmd->add_option("--max-new-tokens", options->max_new_tokens, "Tokens to generate at most")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--num-threads", options->num_threads, "Compute threads (0: one per core)")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--stop", options->stop, "Stop when the text contains this (repeatable)");
  cmd->add_option("--int8-activations", options->int8_activations,
                  "Quantize activations to int8 for GGML block-format weights, as llama.cpp does "
                  "(true/false; false: fp32 activations, transformers' numerics)")
      ->envname("INT8_ACTIVATIONS")
      ->capture_default_str();
  cmd->add_option("--kv-cache-dtype", options->kv_cache_dtype,
                  "KV cache element type, as the launcher's (default: fp16 for "
                  "block-quantized weights with int8 activations, else fp32)")
      ->envname("KV_CACHE_DTYPE");
  add_device_flag(*cmd, options->device);
  add_cpu_isa_flag(*cmd, options->cpu_isa);
  cmd->add_flag("--no-bos", options->no_bos, "Do not add the tokenizer's special prefix tokens");
  SamplingParams& s = options->sampling;
  cmd->add_flag("--do-sample", s.do_sample, "Sample instead of choosing the most likely token");
  cmd->add_option("--temperature", s.temperature, "Divide logits by this")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--top-k", s.top_k, "Keep the k most likely tokens (0: off)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-p", s.top_p, "Nucleus sampling mass (1: off)")
      ->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--typical-p", s.typical_p, "Typical sampling mass (1: off)")
      ->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--repetition-penalty", s.repetition_penalty, "HF repetition penalty (1: off)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--frequency-penalty", s.frequency_penalty, "Frequency penalty (0: off)");
  cmd->add_option("--presence-penalty", s.presence_penalty, "Presence penalty (0: off)");
  cmd->add_option("--seed", s.seed, "Seed of the sampling generator");
  cmd->add_option("--top-n-tokens", s.top_n_tokens, "Alternatives to compute per token")
      ->check(CLI::Range(0, 100));
  cmd->callback([options] { std::exit(run_generate(*options)); });
}

}  // namespace lm
