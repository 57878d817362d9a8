// The settings of the HTTP surface as the launcher resolved them: the limits requests are checked
// against (ValidationLimits) and what /info reports besides. Plain data, held once in ServerState.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace lm {

struct ValidationLimits {
  size_t max_best_of = 2;
  size_t max_stop_sequences = 4;
  uint32_t max_top_n_tokens = 5;
  size_t max_input_tokens = 4095;
  size_t max_total_tokens = 4096;
  // False (--disable-grammar-support, or no grammar compiler): every `grammar` and
  // `response_format` is refused with TGI's `grammar is not supported`.
  bool grammar_support = false;
};

// The settings of the HTTP surface, resolved once by the launcher: every limit that requests are
// checked against and that /info reports is held here once (/info is built from it).
struct ServerSettings {
  ValidationLimits limits;
  int64_t max_concurrent_requests = 128;
  size_t max_client_batch_size = 4;
  size_t validation_workers = 2;
  // --enable-prefill-logprobs: decoder_input_details fills details.prefill (else it stays [], as
  // in TGI 3).
  bool enable_prefill_logprobs = false;
  int64_t kv_bytes_per_block = 0;  // K and V over all layers (lm_kv_cache_resident_bytes)
  std::string model_id;
  std::optional<std::string> model_sha;
  std::optional<std::string> model_pipeline_tag;  // from the Hub; null for local models
};

}  // namespace lm
