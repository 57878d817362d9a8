#include "app/draft_model.h"

#include <fmt/format.h>

#include "app/model_files.h"
#include "model/weight_dtype.h"
#include "runtime/kv_pool.h"

namespace lm {
namespace {

// Proposals are token ids: the draft's must mean what the target's do.
Status check_same_vocabulary(const Tokenizer& target, const Tokenizer& draft) {
  if (target.vocab_size() != draft.vocab_size()) {
    return Error{fmt::format("its vocabulary has {} tokens, the model's {}", draft.vocab_size(),
                             target.vocab_size())};
  }
  for (int32_t id = 0; id < target.vocab_size(); ++id) {
    if (target.token_text(id) != draft.token_text(id)) {
      return Error{fmt::format("token {} is {:?} in its vocabulary, {:?} in the model's", id,
                               draft.token_text(id), target.token_text(id))};
    }
  }
  return {};
}

}  // namespace

Result<DraftModel> load_draft_model(const LauncherArgs& args, const Tokenizer& target_tokenizer,
                                    DType target_kv_dtype) {
  const std::string flag = "--speculative-model-id " + *args.speculative_model_id + ": ";
  auto files = find_model_files({*args.speculative_model_id, std::nullopt,
                                 args.huggingface_hub_cache, args.weights_cache_override});
  if (!files.ok()) return Error{flag + files.error().message};
  auto model = LlamaModel::load(files->path);
  if (!model.ok()) return Error{flag + model.error().message};
  auto tokenizer = load_tokenizer_for(files->path, **model);
  if (!tokenizer.ok()) return Error{flag + tokenizer.error().message};
  if (Status same = check_same_vocabulary(target_tokenizer, **tokenizer); !same.ok())
    return Error{flag + same.error().message + " (a draft must share the model's tokenizer)"};
  DraftModel draft;
  draft.path = files->path;
  draft.weights_bytes = summarize_weights((*model)->weights()).bytes;
  draft.kv_dtype = is_fp8(target_kv_dtype) ? target_kv_dtype : DType::kF16;
  draft.kv_bytes_per_token = KvPool::bytes_per_token((*model)->config(), draft.kv_dtype);
  draft.model = std::move(*model);
  return draft;
}

void prepare_draft_model(DraftModel& draft, bool int8_activations) {
  draft.model->set_int8_activations(int8_activations);
}

}  // namespace lm
