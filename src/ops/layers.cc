#include "ops/layers.h"

#include <cmath>

#include "kernels/cpu/activations.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/rms_norm.h"
#include "kernels/cpu/rope.h"

namespace lm::ops {

namespace {

// Elementwise and per-row kernels are split over the pool only when the work outweighs waking
// it: a prefill chunk's rows are, a decode step's few rows are not. Each element (row) is
// computed the same way either way, so results do not depend on the split.
constexpr int64_t kParallelElements = int64_t{1} << 15;

// fn(begin, end) over [0, rows) rows of `row_elements` each: over the pool when they are many.
template <typename Fn>
void for_rows(int64_t rows, int64_t row_elements, ThreadPool& pool, const Fn& fn) {
  if (rows * row_elements < kParallelElements || rows == 1) {
    fn(0, rows);
    return;
  }
  pool.parallel_for(rows, fn);
}

// fn(begin, end) over elements [0, n): over the pool, in multiples of 1024, when they are many.
template <typename Fn>
void for_elements(int64_t n, ThreadPool& pool, const Fn& fn) {
  if (n < kParallelElements) {
    fn(0, n);
    return;
  }
  pool.parallel_for(n, fn, 1024);
}

}  // namespace

void rms_norm(const Tensor& x, const float* weight, Tensor& y, float eps, ThreadPool& pool) {
  LM_CHECK(x.rank() == 2 && x.shape == y.shape && x.dtype == DType::kF32 && y.dtype == DType::kF32);
  const int64_t n = x.dim(1);
  for_rows(x.dim(0), n, pool, [&](int64_t begin, int64_t end) {
    kernels::rms_norm(x.as<float>() + begin * n, weight, y.as<float>() + begin * n, end - begin, n,
                      eps);
  });
}

namespace {

// gate = f(gate) * up for an elementwise kernel f·mul, over the pool when it is large.
template <typename Kernel>
void gated(Tensor& gate, const Tensor& up, ThreadPool& pool, Kernel kernel) {
  LM_CHECK(gate.shape == up.shape && gate.dtype == DType::kF32 && up.dtype == DType::kF32);
  float* g = gate.as<float>();
  const float* u = up.as<float>();
  for_elements(gate.numel(), pool, [&](int64_t begin, int64_t end) {
    kernel(g + begin, u + begin, g + begin, end - begin);
  });
}

}  // namespace

void silu_mul(Tensor& gate, const Tensor& up, ThreadPool& pool) {
  gated(gate, up, pool,
        [](const float* g, const float* u, float* o, int64_t n) { kernels::silu_mul(g, u, o, n); });
}

void gelu_tanh_mul(Tensor& gate, const Tensor& up, ThreadPool& pool) {
  gated(gate, up, pool, [](const float* g, const float* u, float* o, int64_t n) {
    kernels::gelu_tanh_mul(g, u, o, n);
  });
}

void add(Tensor& y, const Tensor& x, ThreadPool& pool) {
  LM_CHECK(y.shape == x.shape && y.dtype == DType::kF32 && x.dtype == DType::kF32);
  float* out = y.as<float>();
  const float* in = x.as<float>();
  for_elements(y.numel(), pool, [&](int64_t begin, int64_t end) {
    kernels::add_inplace(out + begin, in + begin, end - begin);
  });
}

void scale(Tensor& x, float a) {
  LM_CHECK(x.dtype == DType::kF32);
  float* p = x.as<float>();
  for (int64_t i = 0, n = x.numel(); i < n; ++i) p[i] *= a;
}

void softcap(Tensor& x, float cap) {
  LM_CHECK(x.dtype == DType::kF32 && cap > 0);
  float* p = x.as<float>();
  for (int64_t i = 0, n = x.numel(); i < n; ++i) p[i] = std::tanh(p[i] / cap) * cap;
}

void rope_cos_sin(const int32_t* positions, int64_t num_tokens, const float* inv_freq, int64_t half,
                  float attention_scaling, float* cos, float* sin) {
  kernels::rope_cos_sin(positions, inv_freq, num_tokens, half, attention_scaling, cos, sin);
}

void rope(Tensor& x, int64_t head_dim, const float* cos, const float* sin, RopeMode mode,
          int64_t rotary_dim, ThreadPool& pool) {
  LM_CHECK(x.rank() == 2 && x.dtype == DType::kF32 && head_dim > 0 && x.dim(1) % head_dim == 0);
  const int64_t half = (rotary_dim == 0 ? head_dim : rotary_dim) / 2;
  const int64_t width = x.dim(1);
  const auto kernel_mode =
      mode == RopeMode::kNeox ? kernels::RopeMode::kNeox : kernels::RopeMode::kInterleaved;
  for_rows(x.dim(0), width, pool, [&](int64_t begin, int64_t end) {
    kernels::apply_rope_cos_sin(x.as<float>() + begin * width, cos + begin * half,
                                sin + begin * half, end - begin, width / head_dim, head_dim,
                                kernel_mode, rotary_dim);
  });
}

void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, Tensor& out,
               int64_t head_dim, int64_t first_position, ThreadPool& pool) {
  LM_CHECK(q.rank() == 2 && out.shape == q.shape && k_cache.shape == v_cache.shape &&
           k_cache.rank() == 2);
  const int64_t num_tokens = q.dim(0);
  LM_CHECK(first_position + num_tokens <= k_cache.dim(0));
  LM_CHECK(q.dim(1) % head_dim == 0 && k_cache.dim(1) % head_dim == 0);
  const int64_t num_heads = q.dim(1) / head_dim, num_kv_heads = k_cache.dim(1) / head_dim;
  LM_CHECK(num_heads % num_kv_heads == 0);
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  kernels::attention_causal(q.as<float>(), k_cache.as<float>(), v_cache.as<float>(),
                            out.as<float>(), num_tokens, num_heads, num_kv_heads, head_dim,
                            k_cache.dim(1), first_position, scale, pool);
}

namespace {

// The KV pool's element format for its tensor dtype (KvPool's dtypes only).
kernels::KvFormat kv_format_of(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return kernels::KvFormat::kF32;
    case DType::kF16:
      return kernels::KvFormat::kF16;
    case DType::kBF16:
      return kernels::KvFormat::kBF16;
    case DType::kF8_E4M3:
      return kernels::KvFormat::kF8E4M3;
    case DType::kF8_E5M2:
      return kernels::KvFormat::kF8E5M2;
    default:
      LM_CHECK_MSG(false, "not a KV cache dtype");
      return kernels::KvFormat::kF32;
  }
}

}  // namespace

void store_kv(const Tensor& k, const Tensor& v, const int64_t* slot_mapping, Tensor& k_pool,
              Tensor& v_pool, ThreadPool& pool) {
  LM_CHECK(k.rank() == 2 && k.shape == v.shape && k_pool.rank() == 4 &&
           k_pool.shape == v_pool.shape);
  LM_CHECK(k.dtype == DType::kF32 && v.dtype == DType::kF32 && k_pool.dtype == v_pool.dtype);
  const kernels::KvFormat format = kv_format_of(k_pool.dtype);
  const int64_t kv_dim = k_pool.dim(2) * k_pool.dim(3);
  const int64_t num_slots = k_pool.dim(0) * k_pool.dim(1);
  LM_CHECK(k.dim(1) == kv_dim);
  for (int64_t t = 0; t < k.dim(0); ++t) LM_CHECK(slot_mapping[t] < num_slots);
  // The tokens' slots differ (the contract above), so any split of them writes the same bytes.
  for_rows(k.dim(0), kv_dim, pool, [&](int64_t begin, int64_t end) {
    kernels::store_kv(k.as<float>() + begin * kv_dim, v.as<float>() + begin * kv_dim,
                      slot_mapping + begin, k_pool.data, v_pool.data, end - begin, kv_dim, format);
  });
}

void paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool, Tensor& out,
                     const int32_t* query_begins, const int32_t* first_positions,
                     const int32_t* block_tables, int64_t max_blocks_per_seq, int64_t num_seqs,
                     const AttentionOptions& options, ThreadPool& pool) {
  LM_CHECK(q.rank() == 2 && out.shape == q.shape && k_pool.rank() == 4 &&
           k_pool.shape == v_pool.shape);
  LM_CHECK(q.dtype == DType::kF32 && out.dtype == DType::kF32 && k_pool.dtype == v_pool.dtype);
  const kernels::KvFormat format = kv_format_of(k_pool.dtype);
  const int64_t num_blocks = k_pool.dim(0), block_size = k_pool.dim(1);
  const int64_t num_kv_heads = k_pool.dim(2), head_dim = k_pool.dim(3);
  LM_CHECK(q.dim(1) % head_dim == 0);
  const int64_t num_heads = q.dim(1) / head_dim;
  LM_CHECK(num_heads % num_kv_heads == 0);
  LM_CHECK(num_seqs >= 0 && query_begins[0] == 0 && query_begins[num_seqs] == q.dim(0));
  for (int64_t i = 0; i < num_seqs * max_blocks_per_seq; ++i)
    LM_CHECK(block_tables[i] >= 0 && block_tables[i] < num_blocks);
  kernels::paged_attention(q.as<float>(), k_pool.data, v_pool.data, format, out.as<float>(),
                           query_begins, first_positions, block_tables, max_blocks_per_seq,
                           num_seqs, num_heads, num_kv_heads, head_dim, block_size,
                           {options.scale, options.sliding_window, options.softcap}, pool);
}

}  // namespace lm::ops
