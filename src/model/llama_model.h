// The Llama-family decoder (Llama 1/2/3, Mistral, Mixtral, Qwen2/3 and their MoE, Gemma 1/2/3,
// Phi-3) on the CPU: embedding, N x (RMSNorm, attention with RoPE over a KV cache, RMSNorm, gated
// MLP or sparse MoE block), final norm, LM head.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/thread_pool.h"
#include "loader/weight_store.h"
#include "model/batch_input.h"
#include "model/llama_weights.h"
#include "model/model_config.h"
#include "model/sparse_moe.h"
#include "model/weight_dtype.h"
#include "ops/convert_weight.h"
#include "tensor/tensor.h"

namespace lm {

class GgufFile;

// What the launcher may change about a model's config at load (TGI's --rope-scaling/-factor), and
// TGI's --quantize, checked against the checkpoint's quantization_config (or, for our GGML block
// types, q4_0 ..., checked to be a float checkpoint: quantize_float_weights does it).
struct ModelLoadOptions {
  std::optional<RopeScalingOverride> rope_scaling;
  std::optional<std::string> quantize;
};

class LlamaModel {
 public:
  // `path` is a GGUF file or a Hugging Face model folder (config.json + safetensors).
  static Result<std::unique_ptr<LlamaModel>> load(const std::string& path,
                                                  const ModelLoadOptions& options = {});

  const ModelConfig& config() const { return config_; }
  const LlamaWeights& weights() const { return weights_; }
  // What was repacked from a pre-quantized checkpoint (GPTQ/AWQ/compressed-tensors), or empty.
  const std::string& repack_summary() const { return store_.repack_summary(); }

  // TGI's --dtype: float weight matrices held in `dtype` from now on (model/weight_dtype.h);
  // must come before set_int8_activations. The matrices are spread over `pool`.
  void convert_float_weights(DType dtype, ThreadPool& pool);
  // --quantize q8_0 ... q6_k, bitsandbytes-nf4/-fp4, eetq: float Linear matrices quantized to
  // `block` by `quantizer` at load (model/weight_dtype.h), before convert_float_weights and
  // set_int8_activations. Returns how many were quantized.
  int64_t quantize_float_weights(DType block, ThreadPool& pool,
                                 ops::RowQuantizer quantizer = ops::RowQuantizer::kBlockType);
  // fp32 workspace bytes forward_batch needs per token of a batch.
  static int64_t workspace_bytes_per_token(const ModelConfig& config);

  // Compute Linears with GGML block-format weights on int8-quantized activations (llama.cpp's
  // numerics, faster) instead of fp32 ones. Off by default: the exactness tests pin fp32.
  // Turning it on also interleaves the Linear weights the CPU's int8 GEMM reads faster that way,
  // puts F16/BF16 ones in panels (fp32 activations still) and copies the others that stay in
  // rows, all into one huge-page arena (ops/cpu_weights.h), and hands the mapped files' copies of
  // them back to the kernel (GGUF or safetensors), so it cannot be turned off again.
  void set_int8_activations(bool on);
  // How many weight matrices are stored interleaved.
  int64_t num_interleaved_weights() const { return num_interleaved_; }
  // How many weight matrices are stored in F16/BF16 panels (kernels/cpu/panels16.h, bf16_pairs.h).
  int64_t num_panelled_weights() const { return num_panelled_; }
  bool int8_activations() const { return int8_activations_; }
  // The GGUF file the model came from (for its tokenizer), or null for HF folders.
  const std::shared_ptr<const GgufFile>& gguf() const { return gguf_; }

  // One step for every sequence of a batch: writes each token's K/V to its slot of `kv` and
  // sets logits to [logit_rows, vocab_size]. Each Linear is one matmul over all the batch's rows.
  void forward_batch(const BatchInput& batch, PagedKvView& kv, std::vector<float>& logits,
                     ThreadPool& pool);

 private:
  struct Workspace {
    int64_t num_tokens = 0;
    Buffer x, normed, q, k, v, attn, gate, up;
    Buffer moe_out;  // [n, hidden] the MoE block's output (models with experts)
  };
  LlamaModel() = default;
  void resize_workspace(int64_t num_tokens);
  void prepare_cpu_weights();
  // An FP8 checkpoint's Linears (Tensor::fp8_scales) put into FP8 panels, the form the kernels
  // run (ops::pack_fp8_weight), at load: their file pages handed back.
  void pack_fp8_weights();
  // Frees the --quantize arena once no weight points into it (each has its copy elsewhere).
  void release_unused_quantized_weights();
  // Hands a matrix's file pages back once a copy of it is made (WeightStore::drop_pages).
  void drop_file_pages(const Tensor& source) const;

  ModelConfig config_;
  std::shared_ptr<const GgufFile> gguf_;
  WeightStore store_;
  LlamaWeights weights_;
  Buffer quantized_weights_;  // --quantize q4_0 ...: the float matrices quantized at load
  Buffer converted_weights_;  // --dtype's copies of float matrices weights_ points into
  Buffer prepared_weights_;   // the arena of interleaved, panel and row copies weights_ points into
  Buffer fp8_weights_;        // an FP8 checkpoint's Linears in FP8 panels
  std::deque<Fp8Scales> fp8_scales_;  // their scales (stable addresses: tensors point at them)
  // LLM.int8 matrices' row absmax, copied out of quantized_weights_ when the matrix is copied
  // into the prepared arena (that arena is then freed); tensors point at them.
  std::deque<std::vector<float>> int8_row_absmax_;
  int64_t num_interleaved_ = 0;
  int64_t num_panelled_ = 0;
  Workspace ws_;
  SparseMoe moe_;
  bool int8_activations_ = false;
};

}  // namespace lm
