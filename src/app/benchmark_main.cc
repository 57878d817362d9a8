// text-generation-benchmark: TGI ships a benchmark of this name that drives its model shards
// directly; ours runs the engine in-process (bench/engine_benchmark.h) at the chosen batch sizes,
// prompt and decode lengths, prints prefill and decode latency and throughput with percentiles,
// and writes every run to a JSON file.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "app/cpu_isa_flag.h"
#include "base/log.h"
#include "bench/engine_benchmark.h"
#include "bench/latency_summary.h"
#include "bench/machine_limits.h"
#include "kernels/cpu/isa.h"
#include "model/weight_dtype.h"
#include "runtime/kv_pool.h"

namespace {

struct Options {
  std::string model_id;
  std::vector<int64_t> batch_sizes = {1, 2, 4, 8, 16, 32};
  int64_t sequence_length = 10;
  int64_t decode_length = 8;
  int runs = 10;
  int warmups = 1;
  int num_threads = 0;
  bool int8_activations = true;               // the launcher's default
  std::optional<std::string> kv_cache_dtype;  // the launcher's default when unset
  bool measure_machine = false;
  bool paired_roofline = false;
  std::string output;
  std::string cpu_isa;
};

nlohmann::json to_json(const lm::LatencySummary& s) {
  return {{"count", s.count}, {"mean", s.mean}, {"min", s.min}, {"max", s.max},
          {"p50", s.p50},     {"p90", s.p90},   {"p99", s.p99}};
}

void print_row(const char* what, const lm::LatencySummary& s, double scale, const char* unit) {
  fmt::print(
      "  {:<24} avg {:>10.2f}  min {:>10.2f}  p50 {:>10.2f}  p90 {:>10.2f}  p99 {:>10.2f}  max "
      "{:>10.2f} {}\n",
      what, s.mean * scale, s.min * scale, s.p50 * scale, s.p90 * scale, s.p99 * scale,
      s.max * scale, unit);
}

// The paired roofline's read pass: large enough that no cache holds it, small enough to cost a
// few milliseconds a step.
constexpr int64_t kPairedProbeBytes = int64_t{256} << 20;

int run(const Options& o) {
  // Before the model loads: the level decides the weights' layout.
  auto cpu_isa = lm::apply_cpu_isa(o.cpu_isa);
  if (!cpu_isa.ok()) {
    lm::log_error(cpu_isa.error().message);
    return 1;
  }
  lm::log_info(*cpu_isa);
  auto model = lm::LlamaModel::load(o.model_id);
  if (!model.ok()) {
    lm::log_error(model.error().message);
    return 1;
  }
  const lm::DType kv_dtype =
      lm::resolve_kv_cache_dtype(o.kv_cache_dtype, o.int8_activations,
                                 lm::summarize_weights((*model)->weights()).num_quantized > 0);
  (*model)->set_int8_activations(o.int8_activations);
  lm::ThreadPool pool(o.num_threads);
  fmt::print(
      "model {} | threads {} | kernels {} | int8 activations {} | interleaved weights {} | "
      "16-bit panels {} | KV cache {}\n",
      o.model_id, pool.num_threads(), lm::kernels::isa_name(lm::kernels::best_isa()),
      o.int8_activations ? "on" : "off", (*model)->num_interleaved_weights(),
      (*model)->num_panelled_weights(), lm::kv_cache_dtype_name(kv_dtype));
  nlohmann::json machine;
  if (o.measure_machine) {
    const lm::MachineLimits m = lm::measure_machine_limits(pool);
    fmt::print("machine: memory read {:.2f} GB/s | fp32 FMA peak {:.1f} GFLOP/s ({})\n",
               m.read_bytes_per_second / 1e9, m.fma_flops_per_second / 1e9, m.fma_isa);
    machine = {{"read_bytes_per_second", m.read_bytes_per_second},
               {"fma_flops_per_second", m.fma_flops_per_second},
               {"fma_isa", m.fma_isa}};
  }
  std::optional<lm::ReadProbe> read_probe;
  const int64_t read_bytes = lm::decode_read_bytes((*model)->weights());
  if (o.paired_roofline) {
    read_probe.emplace(pool, kPairedProbeBytes);
    fmt::print(
        "paired roofline: a {} MiB read pass after every decode step; a step reads {:.3f} GB\n",
        kPairedProbeBytes >> 20, static_cast<double>(read_bytes) / 1e9);
  }
  nlohmann::json cases = nlohmann::json::array();
  for (int64_t batch : o.batch_sizes) {
    lm::BenchmarkCase c{batch, o.sequence_length, o.decode_length, kv_dtype};
    if (read_probe) {
      c.read_probe = &*read_probe;
      c.decode_read_bytes = read_bytes;
    }
    auto runs = lm::run_engine_benchmark(**model, pool, c, o.runs, o.warmups);
    if (!runs.ok()) {
      lm::log_error(runs.error().message);
      return 1;
    }
    std::vector<double> prefill, prefill_tps, decode, step, decode_tps, fractions;
    nlohmann::json rows = nlohmann::json::array();
    for (const lm::BenchmarkRun& r : *runs) {
      prefill.push_back(r.prefill_seconds);
      prefill_tps.push_back(r.prefill_tokens_per_second);
      decode.push_back(r.decode_seconds);
      step.push_back(r.decode_step_seconds);
      decode_tps.push_back(r.decode_tokens_per_second);
      fractions.insert(fractions.end(), r.decode_roofline_fractions.begin(),
                       r.decode_roofline_fractions.end());
      rows.push_back({{"prefill_seconds", r.prefill_seconds},
                      {"prefill_tokens_per_second", r.prefill_tokens_per_second},
                      {"decode_seconds", r.decode_seconds},
                      {"decode_step_seconds", r.decode_step_seconds},
                      {"decode_tokens_per_second", r.decode_tokens_per_second},
                      {"decode_roofline_fractions", r.decode_roofline_fractions},
                      {"read_pass_bytes_per_second", r.read_pass_bytes_per_second},
                      {"read_probe_seconds", r.read_probe_seconds}});
    }
    fmt::print("batch {} | sequence length {} | decode length {} | {} runs\n", batch,
               o.sequence_length, o.decode_length, runs->size());
    print_row("prefill latency", lm::summarize(prefill), 1e3, "ms");
    print_row("prefill throughput", lm::summarize(prefill_tps), 1.0, "tokens/s");
    if (o.decode_length > 1) {
      print_row("decode latency (total)", lm::summarize(decode), 1e3, "ms");
      print_row("decode latency (step)", lm::summarize(step), 1e3, "ms");
      print_row("decode throughput", lm::summarize(decode_tps), 1.0, "tokens/s");
      if (!fractions.empty())
        print_row("decode roofline (paired)", lm::summarize(fractions), 100.0,
                  "% of the read pass");
    }
    cases.push_back({{"batch_size", batch},
                     {"sequence_length", o.sequence_length},
                     {"decode_length", o.decode_length},
                     {"prefill_latency_seconds", to_json(lm::summarize(prefill))},
                     {"prefill_tokens_per_second", to_json(lm::summarize(prefill_tps))},
                     {"decode_latency_seconds", to_json(lm::summarize(decode))},
                     {"decode_step_seconds", to_json(lm::summarize(step))},
                     {"decode_tokens_per_second", to_json(lm::summarize(decode_tps))},
                     {"runs", rows}});
    if (!fractions.empty())
      cases.back()["decode_roofline_fraction_steps"] = to_json(lm::summarize(fractions));
  }
  if (!o.output.empty()) {
    nlohmann::json doc = {{"tool", "text-generation-benchmark"},
                          {"model_id", o.model_id},
                          {"threads", pool.num_threads()},
                          {"kernels", lm::kernels::isa_name(lm::kernels::best_isa())},
                          {"int8_activations", o.int8_activations},
                          {"kv_cache_dtype", lm::kv_cache_dtype_name(kv_dtype)},
                          {"interleaved_weights", (*model)->num_interleaved_weights()},
                          {"panelled_weights", (*model)->num_panelled_weights()},
                          {"warmups", o.warmups},
                          {"machine", machine},
                          {"decode_read_bytes", read_bytes},
                          {"cases", cases}};
    std::ofstream out(o.output);
    out << doc.dump(2) << "\n";
    if (!out) {
      lm::log_error("cannot write " + o.output);
      return 1;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"text-generation-benchmark: in-process prefill/decode latency and throughput"};
  Options o;
  app.add_option("--model-id", o.model_id, "A GGUF file or a Hugging Face model folder")
      ->envname("MODEL_ID")
      ->required();
  app.add_option("-b,--batch-size", o.batch_sizes, "Batch sizes to run (repeatable)")
      ->check(CLI::PositiveNumber);
  app.add_option("-s,--sequence-length", o.sequence_length, "Prompt tokens per request")
      ->check(CLI::PositiveNumber);
  app.add_option("-d,--decode-length", o.decode_length, "Generated tokens per request")
      ->check(CLI::PositiveNumber);
  app.add_option("-r,--runs", o.runs, "Recorded runs per batch size")->check(CLI::PositiveNumber);
  app.add_option("-w,--warmups", o.warmups, "Unrecorded runs first")->check(CLI::NonNegativeNumber);
  app.add_option("--num-threads", o.num_threads, "Compute threads (0: one per core)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--int8-activations", o.int8_activations,
                 "Quantize activations to int8 for GGML block formats (true/false)")
      ->capture_default_str();
  app.add_option("--kv-cache-dtype", o.kv_cache_dtype,
                 "KV cache element type, as the launcher's: fp8_e4m3fn, fp8_e5m2, fp16, bf16, fp32")
      ->check([](const std::string& name) {
        return lm::parse_kv_cache_dtype(name) ? std::string()
                                              : "expected " + std::string(lm::kKvCacheDtypeChoices);
      });
  lm::add_cpu_isa_flag(app, o.cpu_isa);
  app.add_flag("--measure-machine", o.measure_machine,
               "Also measure memory read bandwidth and the fp32 FMA peak with these threads");
  app.add_flag("--paired-roofline", o.paired_roofline,
               "After every decode step, a read pass of memory: each step's fraction of the "
               "bandwidth measured beside it (the pass's time is not counted as decode)");
  app.add_option("--output", o.output, "Write every run and the summaries to this JSON file");
  CLI11_PARSE(app, argc, argv);
  return run(o);
}
