// Which sampling rows a device samples itself (only the chosen id and its logprob come back) and
// which go to the host's Sampler with their logits row: the device kernels cover TGI's
// temperature, top-k, top-p and typical-p warpers with a greedy or seeded choice; penalties (the
// counts live on the host), logit_bias, grammars, top_n_tokens (TGI lists every id tied with the
// n-th; the device kernel returns exactly n) and a random row with proposals (its generator must
// advance only for the rows it actually samples) take the host path, with the same results as on
// the CPU. Plain data, tested on the CPU.
#pragma once

#include "engine/sampling_params.h"

namespace lm {

bool samples_on_device(const SamplingParams& params, bool constrained, bool has_proposals);

}  // namespace lm
