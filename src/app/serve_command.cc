#include "app/serve_command.h"

#include <fmt/format.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <thread>
#include <vector>

#include "app/cpu_isa_flag.h"
#include "app/cuda_start.h"
#include "app/draft_model.h"
#include "app/http_config.h"
#include "app/launcher_flags.h"
#include "app/log_level.h"
#include "app/memory_limits.h"
#include "app/model_files.h"
#include "app/start_plan.h"
#include "base/log.h"
#include "base/work_queue.h"
#include "engine/engine.h"
#include "grammar/grammar_compiler.h"
#include "grammar/grammar_vocab.h"
#include "kernels/cpu/isa.h"
#include "runtime/draft_proposer.h"
#include "runtime/kv_pool.h"
#include "runtime/model_executor.h"
#include "runtime/warmup.h"
#include "server/router.h"
#include "server/state/server_state.h"
#include "server/state/tgi_metrics.h"
#include "server/tracing/otlp_http_sender.h"
#include "server/tracing/span_exporter.h"
#include "server/transport/http_server.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer_config.h"

namespace lm {
namespace {

int fail(const std::string& message) {
  log_error(message);
  return 1;
}

sigset_t termination_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

// TGI's LOG_LEVEL (else RUST_LOG) as our one log level.
void apply_log_level_from_env() {
  const char* name = std::getenv("LOG_LEVEL") != nullptr ? "LOG_LEVEL" : "RUST_LOG";
  const char* value = std::getenv(name);
  if (value == nullptr) return;
  if (auto level = parse_log_level(value)) {
    set_log_level(*level);
  } else {
    log_warn(
        fmt::format("{}={} names no log level (trace, debug, info, warn, error); logging at "
                    "info",
                    name, value));
  }
}

// Variables TGI's shards read that select GPU code paths; harmless here, said once. The CUDA
// runner reads TGI_WIGGLE_ROOM (device_kv_plan.h).
void note_gpu_environment(const std::string& device) {
  for (const char* name : {"USE_FLASH_ATTENTION", "ATTENTION", "TGI_WIGGLE_ROOM"}) {
    if (device == "cuda" && std::string_view(name) == "TGI_WIGGLE_ROOM") continue;
    if (const char* value = std::getenv(name)) {
      log_warn(fmt::format("{}={} has no effect on the {} backend", name, value,
                           device == "cuda" ? "CUDA" : "CPU"));
    }
  }
}

std::string rope_scaling_text(const ModelConfig& c, bool overridden) {
  std::string text;
  switch (c.rope.type) {
    case RopeType::kDefault:
      text = "none";
      break;
    case RopeType::kLinear:
      text = "linear";
      break;
    case RopeType::kDynamic:
      text = "dynamic";
      break;
    case RopeType::kLlama3:
      text = "llama3";
      break;
    case RopeType::kLongRope:
      text = "longrope";
      break;
    case RopeType::kYarn:
      text = "yarn";
      break;
  }
  if (c.rope.type != RopeType::kDefault) text += fmt::format(", factor {}", c.rope.factor);
  return text + (overridden ? " (--rope-scaling/--rope-factor)" : " (model config)");
}

}  // namespace

void block_termination_signals() {
  sigset_t set = termination_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int run_server(const LauncherArgs& args) {
  // Before anything reads the kernels' level: it decides the weights' layout at load.
  auto cpu_isa = apply_cpu_isa(args.cpu_isa);
  if (!cpu_isa.ok()) return fail(cpu_isa.error().message);
  if (args.env) {
    std::printf("Target: %s\nCompiler: g++ %s\nCPU kernels: %s\nThreads: %u\nModel id: %s\n",
#if defined(__x86_64__)
                "x86_64-linux-gnu",
#else
                "unknown",
#endif
                __VERSION__, kernels::isa_name(kernels::best_isa()),
                std::thread::hardware_concurrency(), args.model_id.c_str());
    return 0;
  }
  set_json_logs(args.json_output);
  apply_log_level_from_env();
  std::string device_note;
  auto device = resolve_device(args.device, device_note);
  if (!device.ok()) return fail(device.error().message);
  if (!device_note.empty()) log_info(device_note);
  log_info(*cpu_isa);
  LauncherArgs checked = args;
  checked.device = *device;  // the only device check_launcher_args accepts is the one we run on
  auto warnings = check_launcher_args(checked);
  if (!warnings.ok()) return fail(warnings.error().message);
  for (const std::string& w : *warnings) log_warn(w);
  note_gpu_environment(*device);
  auto dtype = launcher_dtype(args);
  if (!dtype.ok()) return fail(dtype.error().message);
  auto rope = launcher_rope_scaling(args);
  if (!rope.ok()) return fail(rope.error().message);
  std::optional<TokenizerConfig> tokenizer_config;
  if (args.tokenizer_config_path) {
    auto read = read_tokenizer_config(*args.tokenizer_config_path);
    if (!read.ok()) return fail("--tokenizer-config-path: " + read.error().message);
    tokenizer_config = std::move(*read);
  }

  auto files = find_model_files({args.model_id, args.revision, args.huggingface_hub_cache,
                                 args.weights_cache_override, args.gguf_file});
  if (!files.ok()) return fail(files.error().message);
  // Measured before the weights are touched: the plan takes them off it (launcher_args.h).
  StartPlan plan;
  plan.memory = available_memory();
  log_info(fmt::format("Loading {}", files->path));
  auto model = LlamaModel::load(files->path, {*rope, args.quantize});
  if (!model.ok()) return fail(model.error().message);
  if (!(*model)->repack_summary().empty()) log_info((*model)->repack_summary());
  auto tokenizer = load_tokenizer_for(files->path, **model);
  if (!tokenizer.ok()) return fail(tokenizer.error().message);
  const ModelConfig& config = (*model)->config();

  plan.model_id = args.model_id;
  plan.model_path = files->path;
  plan.architecture = config.architecture_name;
  plan.dtype = args.dtype;
  // --quantize fp8 names a pre-quantized FP8 checkpoint's format too: nothing to quantize then.
  const std::optional<DType> load_quantization = args.quantize && (*model)->repack_summary().empty()
                                                     ? load_quantization_dtype(*args.quantize)
                                                     : std::nullopt;
  plan.weights = summarize_weights((*model)->weights(), *dtype, load_quantization);
  plan.rope_scaling = rope_scaling_text(config, rope->has_value());
  plan.device = *device;
  plan.num_threads = args.num_threads > 0
                         ? args.num_threads
                         : static_cast<int64_t>(std::thread::hardware_concurrency());
  plan.int8_activations = args.int8_activations;
  plan.cpu_isa = kernels::isa_name(kernels::best_isa());
  plan.limits.max_position_embeddings = std::min(config.max_context(), int64_t{1} << 20);
  // bitsandbytes' NF4/FP4 have no int8 path (fp32 activations, transformers' numerics), and its
  // LLM.int8 quantizes activations its own way, exactly as bitsandbytes does: they keep the fp32
  // cache of float weights, as transformers computes with them.
  // FP8 weights take fp32 activations too (FP8 panels).
  const bool int8_path_at_load = load_quantization && *load_quantization != DType::kNF4 &&
                                 *load_quantization != DType::kFP4 &&
                                 *load_quantization != DType::kF8_E4M3 &&
                                 load_row_quantizer(*args.quantize) != ops::RowQuantizer::kLlmInt8;
  DType kv_dtype = resolve_kv_cache_dtype(args.kv_cache_dtype, args.int8_activations,
                                          plan.weights.num_quantized > 0 || int8_path_at_load);
  plan.kv_cache_dtype = kv_cache_dtype_name(kv_dtype);
  // Dynamic NTK and LongRoPE rotate a sequence's keys by factors that depend on how long it gets:
  // a cached block written for one request is not what another would have written, and verified
  // proposals (rows of one forward, whose RoPE length is the step's end) are not the rows plain
  // decoding computes.
  const bool length_dependent_rope = config.rope.depends_on_length();
  // A draft model proposes where speculation runs: its weights and cache count against memory.
  std::optional<DraftModel> draft;
  if (args.speculative_model_id && args.speculate.value_or(1) > 0 && *device == "cpu" &&
      !length_dependent_rope) {
    log_info(fmt::format("Loading the draft model {}", *args.speculative_model_id));
    auto loaded = load_draft_model(args, **tokenizer, kv_dtype);
    if (!loaded.ok()) return fail(loaded.error().message);
    draft = std::move(*loaded);
    plan.draft_model_path = draft->path;
  }
  const int64_t kv_bytes_per_token = KvPool::bytes_per_token(config, kv_dtype);
  plan.limits.kv_bytes_per_token = kv_bytes_per_token + (draft ? draft->kv_bytes_per_token : 0);
  plan.limits.weights_bytes = plan.weights.bytes + (draft ? draft->weights_bytes : 0);
  plan.limits.activation_bytes_per_token = LlamaModel::workspace_bytes_per_token(config);
  plan.kv_cache_memory_fraction = args.kv_cache_memory_fraction;
  // On the GPU the K/V pool lives in device memory, sized after warm-up (cuda_start.h): host RAM
  // bounds nothing here, and the device plan checks the limits.
  auto settings = derive_serve_settings(
      args, plan.limits,
      *device == "cuda" ? std::numeric_limits<uint64_t>::max() : plan.memory.bytes);
  if (!settings.ok()) return fail(settings.error().message);
  plan.settings = *settings;

  EngineConfig engine_config;
  engine_config.max_batch_size = settings->max_batch_size;
  engine_config.max_batch_prefill_tokens = settings->max_batch_prefill_tokens;
  engine_config.max_batch_total_tokens = settings->max_batch_total_tokens;
  engine_config.eos_token_ids = config.eos_token_ids;
  engine_config.block_size = args.kv_block_size;
  engine_config.prefix_caching = args.prefix_caching && !length_dependent_rope;
  if (args.prefix_caching && length_dependent_rope)
    log_info("prefix caching is off: this model's RoPE depends on each sequence's length");
  engine_config.max_step_latency_ms = args.max_step_latency_ms;
  // A draft model proposes 4 tokens a step unless --speculate says otherwise.
  engine_config.speculate = length_dependent_rope ? 0 : args.speculate.value_or(draft ? 4 : 0);
  engine_config.adaptive_speculation = args.adaptive_speculation;
  if (args.speculate.value_or(0) > 0 && length_dependent_rope)
    log_info("speculation is off: this model's RoPE depends on each sequence's length");
  // When every layer attends through a window, K/V before the widest one is never read again:
  // the engine hands those blocks back as sequences advance.
  const std::vector<int64_t>& windows = config.layer_sliding_windows;
  if (!windows.empty() && std::ranges::all_of(windows, [](int64_t w) { return w > 0; }))
    engine_config.kv_window_tokens = std::ranges::max(windows);
  // Unused cached prefixes are kept resident up to a budget (a quarter of the pool by default),
  // so that resident memory follows the working set rather than growing to the whole pool.
  int64_t kv_bytes_per_block = kv_bytes_per_token * engine_config.block_size;
  // Again once the CUDA runner has sized its own pool.
  auto set_prefix_cache_budget = [&] {
    if (!args.prefix_cache_max_mib) {
      engine_config.max_cached_blocks = (kv_num_blocks(engine_config) - 1) / 4;
    } else if (*args.prefix_cache_max_mib >= 0) {
      engine_config.max_cached_blocks = (*args.prefix_cache_max_mib << 20) / kv_bytes_per_block;
    }
  };
  set_prefix_cache_budget();
  plan.kv_block_size = engine_config.block_size;
  plan.kv_num_blocks = kv_num_blocks(engine_config);
  plan.prefix_caching = engine_config.prefix_caching;
  plan.prefix_cache_max_blocks = engine_config.max_cached_blocks;
  plan.max_step_latency_ms = engine_config.max_step_latency_ms;
  plan.speculate = engine_config.speculate;
  plan.adaptive_speculation = engine_config.adaptive_speculation;
  if (args.dry_run) {
    std::fputs((args.json_output ? plan_json(plan) + "\n" : plan_text(plan)).c_str(), stdout);
    return 0;
  }

  ThreadPool pool(static_cast<int>(args.num_threads));
  log_info(dtype_log_line(plan));
  if (load_quantization) {
    const auto start = std::chrono::steady_clock::now();
    const int64_t n = (*model)->quantize_float_weights(*load_quantization, pool,
                                                       load_row_quantizer(*args.quantize));
    // The stored types show llama.cpp's fallbacks (K-quants on rows of whole 32-value blocks).
    log_info(fmt::format(
        "--quantize {}: quantized {} float weight matrices at load in {:.1f}s (matrices now {})",
        *args.quantize, n,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
        summarize_weights((*model)->weights()).stored_dtypes));
  }
  if (*dtype) (*model)->convert_float_weights(**dtype, pool);
  // The engine's executor: the CUDA runner's (which uploads the weights as they are now, warms
  // up and sizes its K/V pool from free device memory), or the CPU's over the prepared weights.
  std::unique_ptr<Executor> executor;
#if defined(LM_WITH_CUDA)
  CudaServing cuda;
#endif
  if (*device == "cuda") {
#if defined(LM_WITH_CUDA)
    log_info("Warming up model");
    auto started = start_cuda_serving(args, **model, *settings, engine_config);
    if (!started.ok()) return fail(started.error().message);
    cuda = std::move(*started);
    executor = std::move(cuda.executor);
    kv_dtype = DType::kF32;
    plan.kv_cache_dtype = kv_cache_dtype_name(kv_dtype);
    kv_bytes_per_block =
        cuda_runtime::CudaModel::kv_bytes_per_block(config, engine_config.block_size);
    set_prefix_cache_budget();
#else
    return fail("--device cuda: this binary was built without CUDA");
#endif
  } else {
    (*model)->set_int8_activations(args.int8_activations);
    if (const int64_t n = (*model)->num_interleaved_weights(); n > 0)
      log_info(fmt::format("Interleaved {} weight matrices for the int8 GEMM", n));
    if (const int64_t n = (*model)->num_panelled_weights(); n > 0)
      log_info(fmt::format("Put {} F16/BF16 weight matrices in panels of 16 rows", n));
    log_info(memory_log_line(plan));
    if (settings->max_batch_total_tokens_inferred) {
      log_info(
          fmt::format("Setting max batch total tokens to {}", settings->max_batch_total_tokens));
    }

    log_info("Warming up model");
    if (Status s = warm_up(**model, pool, std::min<int64_t>(settings->max_batch_prefill_tokens, 64),
                           kv_dtype);
        !s.ok()) {
      return fail(s.error().message);
    }
    executor = std::make_unique<ModelExecutor>(**model, pool, engine_config, kv_dtype);
  }
  // The draft's own K/V pool holds as many tokens as the model's.
  std::unique_ptr<Proposer> proposer;
  if (draft && engine_config.speculate > 0) {
    prepare_draft_model(*draft, args.int8_activations);
    proposer = std::make_unique<DraftProposer>(*draft->model, pool, kv_num_blocks(engine_config),
                                               engine_config.block_size, draft->kv_dtype,
                                               config.vocab_size);
  }

  if (engine_config.eos_token_ids.empty() && (*tokenizer)->eos_id()) {
    engine_config.eos_token_ids.push_back(*(*tokenizer)->eos_id());
  }
  log_info(fmt::format("KV cache: {} blocks of {} tokens, {}, prefix caching {}",
                       kv_num_blocks(engine_config), engine_config.block_size, plan.kv_cache_dtype,
                       engine_config.prefix_caching ? "on" : "off"));
  if (const auto& layers = (*model)->weights().layers;
      std::any_of(layers.begin(), layers.end(), [](const auto& l) { return l.has_kv_scales; })) {
    log_info(is_fp8(kv_dtype)
                 ? "KV cache: the checkpoint's k_scale / v_scale per layer applied (K / k_scale "
                   "and V / v_scale stored in FP8)"
                 : fmt::format("KV cache: the checkpoint's k_scale / v_scale are for an FP8 "
                               "cache and are not used with {} (--kv-cache-dtype fp8_e4m3fn "
                               "applies them)",
                               plan.kv_cache_dtype));
  }
  const char* adaptive = engine_config.adaptive_speculation
                             ? "; only in the steps where it is measured to pay"
                             : "; in every decode step (--adaptive-speculation false)";
  if (engine_config.speculate > 0 && proposer) {
    log_info(fmt::format(
        "Speculation: up to {} tokens proposed per decode step by the draft model {} ({} "
        "cache){}",
        engine_config.speculate, draft->path, kv_cache_dtype_name(draft->kv_dtype), adaptive));
  } else if (engine_config.speculate > 0) {
    log_info(fmt::format("Speculation: up to {} n-gram tokens proposed per decode step{}",
                         engine_config.speculate, adaptive));
  }
  if (engine_config.kv_window_tokens > 0)
    log_info(
        fmt::format("KV cache: every layer has a sliding window (at most {} tokens), so "
                    "blocks before it are freed as sequences advance",
                    engine_config.kv_window_tokens));
  // Request traces (--otlp-endpoint): the exporter outlives the state, the engine and the HTTP
  // server, whose requests hand it their spans. Without an endpoint there is none, nor a thread.
  std::unique_ptr<SpanExporter> span_exporter;
  if (args.otlp_endpoint) {
    const std::string url = otlp_traces_url(*args.otlp_endpoint);
    span_exporter = std::make_unique<SpanExporter>(args.otlp_service_name,
                                                   std::make_unique<OtlpHttpSender>(url));
    log_info(fmt::format("Exporting traces to {} (OTLP/HTTP, JSON; service.name {})", url,
                         args.otlp_service_name));
  }
  // The state outlives the engine: the engine thread records each step into its metrics.
  ServerState state;
  state.span_exporter = span_exporter.get();
  register_tgi_metrics(state.metrics, settings->max_input_tokens, settings->max_total_tokens);
  label_vllm_metrics(state.metrics, args.model_id);
  Engine engine(
      engine_config, std::move(executor),
      [&metrics = state.metrics](const StepStats& step) { record_step(metrics, step); },
      std::move(proposer));
  state.tokenizer = tokenizer->get();
  state.engine = &engine;
  ServerSettings& served = state.settings;
  served.kv_bytes_per_block = kv_bytes_per_block;
  served.limits.max_best_of = static_cast<size_t>(args.max_best_of);
  served.limits.max_stop_sequences = static_cast<size_t>(args.max_stop_sequences);
  served.limits.max_top_n_tokens = static_cast<uint32_t>(args.max_top_n_tokens);
  served.limits.max_input_tokens = static_cast<size_t>(settings->max_input_tokens);
  served.limits.max_total_tokens = static_cast<size_t>(settings->max_total_tokens);
  served.max_concurrent_requests = args.max_concurrent_requests;
  served.max_client_batch_size = static_cast<size_t>(args.max_client_batch_size);
  served.validation_workers = static_cast<size_t>(args.validation_workers);
  served.enable_prefill_logprobs = args.enable_prefill_logprobs;
  served.model_id = args.model_id;
  served.model_sha = files->commit_sha;
  served.model_pipeline_tag = files->pipeline_tag;
  state.api_key = args.api_key;
  state.cors_allow_origin = args.cors_allow_origin;
  if (const char* compute_type = std::getenv("COMPUTE_TYPE")) state.compute_type = compute_type;
  // The chat template: GGUF tokenizer.chat_template, or tokenizer_config.json's chat_template;
  // --tokenizer-config-path's replaces it (and the bos/eos texts templates see), as in TGI.
  std::string source = (*tokenizer)->chat_template();
  std::string tool_use_source = (*tokenizer)->tool_use_template();
  if (tokenizer_config && !tokenizer_config->chat_template.empty()) {
    source = tokenizer_config->chat_template;
    tool_use_source = tokenizer_config->tool_use_template;
  }
  for (auto [text, target] : {std::pair{&source, &state.chat_template},
                              std::pair{&tool_use_source, &state.tool_use_template}}) {
    if (text->empty()) continue;
    auto compiled = ChatTemplate::compile(*text);
    if (compiled.ok()) {
      *target = std::make_shared<const ChatTemplate>(std::move(*compiled));
    } else {
      log_warn(fmt::format("Could not parse the chat template ({}); chat requests will fail",
                           compiled.error().message));
    }
  }
  if (auto id = (*tokenizer)->bos_id()) state.bos_token = (*tokenizer)->token_text(*id);
  if (auto id = (*tokenizer)->eos_id()) state.eos_token = (*tokenizer)->token_text(*id);
  if (tokenizer_config && tokenizer_config->bos_token)
    state.bos_token = *tokenizer_config->bos_token;
  if (tokenizer_config && tokenizer_config->eos_token)
    state.eos_token = *tokenizer_config->eos_token;
  // Constrained decoding: the vocabulary as the grammar engine sees it (the model's logits width,
  // the engine's EOS ids as the ids that end a grammar) and the compiled-grammar cache.
  std::unique_ptr<GrammarVocab> grammar_vocab;
  std::unique_ptr<GrammarCompiler> grammar_compiler;
  served.limits.grammar_support = !args.disable_grammar_support;
  if (served.limits.grammar_support) {
    const auto started = std::chrono::steady_clock::now();
    grammar_vocab = std::make_unique<GrammarVocab>(
        **tokenizer, static_cast<int32_t>(config.vocab_size), engine_config.eos_token_ids);
    grammar_compiler = std::make_unique<GrammarCompiler>(*grammar_vocab);
    state.grammar_compiler = grammar_compiler.get();
    log_info(fmt::format(
        "Grammar support: {} tokens indexed in {:.0f} ms", grammar_vocab->vocab_size(),
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
            .count()));
  }

  // Admission (templates, tokenization, grammar compilation) runs here, off the I/O threads.
  // Declared after everything its tasks use, so it is joined before they are destroyed.
  WorkQueue validation_workers(static_cast<int>(args.validation_workers));
  state.validation_workers = &validation_workers;

  const uint64_t fd_limit = raise_fd_limit();
  const HttpServerConfig http = http_server_config(args, fd_limit);
  // The cap exists to keep descriptors for the model, the engine and refusals: say so when not.
  if (http.max_connections == 0 || http.max_connections >= fd_limit) {
    log_warn(
        fmt::format("--max-connections {} does not keep open connections below the file "
                    "descriptor limit ({}): a flood of clients can make every accept fail",
                    http.max_connections, fd_limit));
  } else {
    log_info(fmt::format("Connections: at most {} open (file descriptor limit {})",
                         http.max_connections, fd_limit));
  }
  HttpServer server(http, make_router(state));
  if (Status s = server.start(); !s.ok())
    return fail("Webserver cannot start: " + s.error().message);
  log_info(
      fmt::format("Connected: serving {} on {}:{}", args.model_id, args.hostname, server.port()));

  sigset_t signals = termination_signals();
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  log_info("signal received, starting graceful shutdown");
  server.stop_accepting();
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(args.graceful_termination_timeout);
  while (server.in_flight() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  engine.stop();
  server.stop();
  validation_workers.stop();
  // TGI flushes its spans after the drain; the drained requests' spans are all queued by now.
  if (span_exporter) span_exporter->shutdown();
  return 0;
}

}  // namespace lm
