#include "model/sparse_moe.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "model/expert_routing.h"
#include "ops/layers.h"
#include "ops/linear.h"

namespace lm {
namespace {

// The first `rows` rows of a 2-D fp32 buffer, with `cols` columns.
Tensor head_rows(Buffer& b, int64_t rows, int64_t cols) {
  return Tensor{DType::kF32, {rows, cols}, b.view().data, Device::kCpu};
}

int64_t max_intermediate(const MoeConfig& c) {
  return std::max(c.expert_intermediate_size, c.shared_expert_intermediate_size);
}

}  // namespace

int64_t SparseMoe::workspace_bytes_per_token(const MoeConfig& c, int64_t hidden) {
  return static_cast<int64_t>(sizeof(float)) *
         (c.num_experts + 2 * hidden + 2 * max_intermediate(c));
}

void SparseMoe::resize(const MoeConfig& c, int64_t n, int64_t hidden) {
  if (num_tokens_ >= n) return;
  num_tokens_ = n;
  router_logits_ = Buffer({n, c.num_experts});
  rows_in_ = Buffer({n, hidden});
  gate_ = Buffer({n, max_intermediate(c)});
  up_ = Buffer({n, max_intermediate(c)});
  rows_out_ = Buffer({n, hidden});
}

void SparseMoe::mlp(const MlpWeights& w, const Tensor& x, Tensor& out, ThreadPool& pool,
                    bool int8) {
  const int64_t rows = x.dim(0), inter = w.gate_proj.dim(0);
  Tensor gate = head_rows(gate_, rows, inter), up = head_rows(up_, rows, inter);
  ops::linear_shared_input(x, {{&w.gate_proj, {}, &gate}, {&w.up_proj, {}, &up}}, pool, int8);
  ops::silu_mul(gate, up, pool);
  ops::linear(gate, w.down_proj, {}, out, pool, int8);
}

void SparseMoe::forward(const MoeConfig& c, const MoeWeights& w, const Tensor& x, Tensor& out,
                        ThreadPool& pool, bool int8) {
  const int64_t n = x.dim(0), hidden = x.dim(1);
  LM_CHECK(out.dim(0) == n && out.dim(1) == hidden && out.data != x.data);
  LM_CHECK(static_cast<int64_t>(w.experts.size()) == c.num_experts);
  resize(c, n, hidden);
  // NOTE: the router runs one token at a time. A multi-row float GEMM sums in another order than
  // the one-row dot, and a last-bit difference can flip a near-tied expert choice: a token's
  // experts must not depend on which other tokens share its step (batch invariance).
  for (int64_t t = 0; t < n; ++t) {
    const Tensor row{DType::kF32, {1, hidden}, x.as<float>() + t * hidden, Device::kCpu};
    Tensor logits_row{DType::kF32,
                      {1, c.num_experts},
                      router_logits_.view().as<float>() + t * c.num_experts,
                      Device::kCpu};
    ops::linear(row, w.router, {}, logits_row, pool, int8);
  }
  const Tensor logits = head_rows(router_logits_, n, c.num_experts);
  const ExpertRouting routing =
      route_tokens(logits.as<float>(), n, c.num_experts, c.num_experts_per_tok, c.norm_topk_prob);

  const float* in = x.as<float>();
  float* y = out.as<float>();
  std::fill_n(y, n * hidden, 0.0f);
  for (int64_t e = 0; e < c.num_experts; ++e) {
    const int64_t m = routing.num_tokens_of(e);
    if (m == 0) continue;
    const int32_t* tokens = routing.tokens.data() + routing.begins[static_cast<size_t>(e)];
    const float* weights = routing.weights.data() + routing.begins[static_cast<size_t>(e)];
    Tensor rows = head_rows(rows_in_, m, hidden), rows_out = head_rows(rows_out_, m, hidden);
    for (int64_t r = 0; r < m; ++r)
      std::copy_n(in + tokens[r] * hidden, hidden, rows.as<float>() + r * hidden);
    mlp(w.experts[static_cast<size_t>(e)], rows, rows_out, pool, int8);
    // Each token appears once per expert: rows scatter to distinct outputs.
    pool.parallel_for(m, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const float* src = rows_out.as<float>() + r * hidden;
        float* dst = y + tokens[r] * hidden;
        for (int64_t i = 0; i < hidden; ++i) dst[i] += src[i] * weights[r];
      }
    });
  }
  if (w.shared_expert.gate_proj.empty()) return;
  // Qwen2-MoE: + sigmoid(x . shared_expert_gate) * shared_expert(x), for every token.
  Tensor shared = head_rows(rows_out_, n, hidden);
  mlp(w.shared_expert, x, shared, pool, int8);
  const float* shared_gate = w.shared_expert_gate.data();
  for (int64_t t = 0; t < n; ++t) {
    float dot = 0;
    for (int64_t i = 0; i < hidden; ++i) dot += in[t * hidden + i] * shared_gate[i];
    const float gate = 1.0f / (1.0f + std::exp(-dot));
    for (int64_t i = 0; i < hidden; ++i)
      y[t * hidden + i] += gate * shared.as<float>()[t * hidden + i];
  }
}

}  // namespace lm
