// The draft model of --speculative-model-id (ours; vLLM's --speculative-model, llama.cpp's
// --model-draft): found as --model-id is (a local GGUF file or folder, or a Hub repository),
// loaded, checked to share the target's vocabulary token for token, and prepared for the CPU
// kernels as the target is. Its proposals are verified by the target (runtime/draft_proposer.h).
#pragma once

#include <memory>
#include <string>

#include "app/launcher_args.h"
#include "base/result.h"
#include "model/llama_model.h"
#include "tensor/dtype.h"
#include "tokenizer/tokenizer.h"

namespace lm {

struct DraftModel {
  std::unique_ptr<LlamaModel> model;
  std::string path;
  int64_t weights_bytes = 0;       // as held in memory
  DType kv_dtype = DType::kF16;    // its K/V cache's
  int64_t kv_bytes_per_token = 0;  // all its layers, keys and values
};

// Loads args.speculative_model_id (the Hub settings as for --model-id, its default revision).
// Fails, naming the flag, when it cannot be found or loaded or its vocabulary differs from
// `target_tokenizer`'s. Its cache holds fp16 (or the target's FP8): proposals need no more.
Result<DraftModel> load_draft_model(const LauncherArgs& args, const Tokenizer& target_tokenizer,
                                    DType target_kv_dtype);

// Prepares the loaded draft's weights for the CPU kernels (LlamaModel::set_int8_activations),
// once the start is past its dry run.
void prepare_draft_model(DraftModel& draft, bool int8_activations);

}  // namespace lm
