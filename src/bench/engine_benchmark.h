// The in-process engine benchmark behind `text-generation-benchmark` (TGI ships a tool of that
// name that drives its model shards directly). Each run submits `batch_size` requests of
// `sequence_length` random prompt ids at once to a fresh Engine over the real ModelExecutor and
// times, from the engine's token callbacks:
//   prefill: submit -> every request has its first token (one batched prefill step when
//            max_batch_prefill_tokens allows, as TGI's benchmark does);
//   decode:  first token of the batch -> last token, (decode_length - 1) steps.
// Prefix caching is off, so every run computes every prompt token.
#pragma once

#include <cstdint>
#include <vector>

#include "base/result.h"
#include "base/thread_pool.h"
#include "model/llama_model.h"

namespace lm {

class ReadProbe;  // bench/machine_limits.h

struct BenchmarkCase {
  int64_t batch_size = 1;
  int64_t sequence_length = 10;  // prompt tokens per request
  int64_t decode_length = 8;     // generated tokens per request (EOS ignored)
  DType kv_dtype = DType::kF32;  // the K/V pool's elements (--kv-cache-dtype)
  // The paired decode roofline (--paired-roofline), when set: after every step that only
  // decoded, with the pool idle, one read pass of `read_probe`, and that step's fraction of the
  // roofline taken against it: decode_read_bytes / step seconds / the pass's bytes per second.
  // The passes' time is left out of decode_seconds.
  ReadProbe* read_probe = nullptr;
  int64_t decode_read_bytes = 0;  // what one decode step reads (the weights it streams)
};

struct BenchmarkRun {
  double prefill_seconds = 0;  // submit -> last first token
  double decode_seconds = 0;   // last first token -> last token
  // Tokens per second over the phase: batch * sequence_length / prefill, and
  // batch * (decode_length - 1) / decode (0 when decode_length is 1).
  double prefill_tokens_per_second = 0;
  double decode_tokens_per_second = 0;
  double decode_step_seconds = 0;  // decode_seconds / (decode_length - 1)
  // The paired roofline (empty without a read probe): per decode step, its fraction and what the
  // read pass after it read; and the seconds of the passes left out of decode_seconds.
  std::vector<double> decode_roofline_fractions;
  std::vector<double> read_pass_bytes_per_second;
  double read_probe_seconds = 0;
};

// The bytes one decode step reads: every weight matrix and the fp32 vectors, but not the input
// embedding table when the head is not that table's own memory (untied, or a tied head copied
// into panels or interleaved rows), since a step reads one row of the table a token. (A mixture
// of experts reads only its chosen experts: its steps read less than this.)
int64_t decode_read_bytes(const LlamaWeights& weights);

// Runs `warmups` unrecorded runs (prefill + one decode step) and `runs` recorded repetitions of
// `c`. Prompt ids are drawn from
// [0, vocab) with a fixed seed (the same prompts on every run and for every build).
Result<std::vector<BenchmarkRun>> run_engine_benchmark(LlamaModel& model, ThreadPool& pool,
                                                       const BenchmarkCase& c, int runs,
                                                       int warmups);

}  // namespace lm
