// Warm-up before serving, as TGI's: one request of a synthetic prompt through an Engine of its
// own (one prefill, one token sampled with every sampling feature on), so workspaces are sized
// and a broken model fails before traffic.
#pragma once

#include <cstdint>

#include "base/result.h"
#include "base/thread_pool.h"
#include "engine/executor.h"
#include "model/llama_model.h"

namespace lm {

// Runs a prompt of `num_tokens` ids (clamped so it and its one new token fit the model's context)
// through `model`. Fails when num_tokens < 1 or the model produces a non-finite logit.
Status warm_up(LlamaModel& model, ThreadPool& pool, int64_t num_tokens,
               DType kv_dtype = DType::kF32);

// The same through an executor the caller keeps (the CUDA runner's, whose K/V pool holds at
// least num_tokens + 1 tokens in blocks of `block_size`): the caller turns its non-finite check
// on. Its sequence is released before this returns.
Status warm_up(Executor& executor, const ModelConfig& config, int64_t num_tokens,
               int64_t block_size);

}  // namespace lm
