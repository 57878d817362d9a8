// Tokenizer::from_gguf_vocab: the pipeline a GGUF vocabulary implies, matching the model's real
// tokenizer.json (and scripts/fixtures/hf_tokenizer_from_gguf.py, which writes it out):
// "gpt2" = byte-level BPE with the split regex chosen by `pre`; "llama" = SentencePiece-style BPE
// with merges rebuilt from the scores, byte fallback and a "▁" prefix; "gemma4" = the same
// SentencePiece-style BPE with its merges stored (tokenizer.ggml.merges) and no "▁" prefix.
#include <algorithm>

#include "base/utf8.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_parts.h"

namespace lm {
namespace {

constexpr int32_t kTypeUnknown = 2, kTypeControl = 3, kTypeUserDefined = 4;
constexpr const char* kSentencePieceSpace = "\xE2\x96\x81";  // U+2581 "▁"

constexpr const char* kLlama3Split =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Split =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Qwen3.5's: Qwen2's with combining marks (\p{M}) kept inside words, so decomposed accents stay
// with their letter. Its tokenizer.json has no NFC normalizer, unlike Qwen2's.
constexpr const char* kQwen35Split =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Split(regex, Isolated) then ByteLevel without its own regex.
Result<std::unique_ptr<PreTokenizer>> split_then_bytes(const char* pattern) {
  LM_ASSIGN_OR_RETURN(auto regex, Regex::compile(pattern));
  std::vector<std::unique_ptr<PreTokenizer>> steps;
  steps.emplace_back(new SplitPreTokenizer(std::move(regex), "", SplitBehavior::kIsolated, false));
  steps.emplace_back(new ByteLevelPreTokenizer(false, nullptr));
  return std::unique_ptr<PreTokenizer>(new SequencePreTokenizer(std::move(steps)));
}

Result<std::unique_ptr<PreTokenizer>> byte_level_with_regex() {
  LM_ASSIGN_OR_RETURN(auto regex, Regex::compile(kGpt2SplitRegex));
  return std::unique_ptr<PreTokenizer>(new ByteLevelPreTokenizer(false, std::move(regex)));
}

// Byte-level pipeline for `pre`; sets ignore_merges and returns whether BOS is added by default.
Result<bool> byte_level_pipeline(const std::string& pre, TokenizerParts& parts,
                                 BpeOptions& options) {
  if (pre == "smollm") {
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    steps.emplace_back(new DigitsPreTokenizer(true));
    LM_ASSIGN_OR_RETURN(auto byte_level, byte_level_with_regex());
    steps.push_back(std::move(byte_level));
    parts.pre_tokenizer.reset(new SequencePreTokenizer(std::move(steps)));
    return false;
  }
  if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3") {
    LM_ASSIGN_OR_RETURN(parts.pre_tokenizer, split_then_bytes(kLlama3Split));
    options.ignore_merges = true;
    return true;
  }
  if (pre == "qwen2") {
    parts.normalizer.reset(new UnicodeNormalizer(UnicodeNormalizer::Form::kNfc));
    LM_ASSIGN_OR_RETURN(parts.pre_tokenizer, split_then_bytes(kQwen2Split));
    return false;
  }
  if (pre == "qwen35") {
    LM_ASSIGN_OR_RETURN(parts.pre_tokenizer, split_then_bytes(kQwen35Split));
    return false;
  }
  if (pre == "gpt-2" || pre == "gpt2" || pre == "default" || pre.empty()) {
    LM_ASSIGN_OR_RETURN(parts.pre_tokenizer, byte_level_with_regex());
    return false;
  }
  return Error{"GGUF tokenizer.ggml.pre '" + pre +
               "' is not supported for a byte-level vocabulary (supported: smollm, llama-bpe, "
               "qwen2, qwen35, gpt-2, default)"};
}

// Merges implied by a SentencePiece vocabulary, in the order of transformers' generate_merges:
// every split of a token into two vocabulary pieces, best score first, then longer left piece,
// then longer right piece; within one token by the pieces' ids.
std::vector<std::pair<std::string, std::string>> merges_from_scores(
    const std::vector<std::string>& tokens, const std::vector<float>& scores) {
  std::unordered_map<std::string, int32_t> index;  // last occurrence wins, as in a Python dict
  for (size_t i = 0; i < tokens.size(); ++i) index[tokens[i]] = static_cast<int32_t>(i);
  struct Candidate {
    int32_t left, right;
    float score;
    size_t left_chars, right_chars;
  };
  std::vector<Candidate> all;
  std::unordered_map<std::string, bool> seen;
  for (size_t t = 0; t < tokens.size(); ++t) {
    const std::string& token = tokens[t];
    if (!seen.emplace(token, true).second) continue;  // dict(zip(...)) keeps the first position
    const float score = scores[index[token]];         // ... and the last value
    std::vector<Candidate> local;
    const size_t chars = utf8_length(token);
    size_t pos = 0, left_chars = 0;
    while (left_chars + 1 < chars) {
      if (utf8_valid_len(token, pos) == 0) break;
      utf8_next(token, pos);
      ++left_chars;
      auto l = index.find(token.substr(0, pos));
      auto r = index.find(token.substr(pos));
      if (l != index.end() && r != index.end()) {
        local.push_back({l->second, r->second, score, left_chars, chars - left_chars});
      }
    }
    std::sort(local.begin(), local.end(), [](const Candidate& a, const Candidate& b) {
      return a.left != b.left ? a.left < b.left : a.right < b.right;
    });
    all.insert(all.end(), local.begin(), local.end());
  }
  std::stable_sort(all.begin(), all.end(), [](const Candidate& a, const Candidate& b) {
    if (a.score != b.score) return a.score > b.score;
    if (a.left_chars != b.left_chars) return a.left_chars > b.left_chars;
    return a.right_chars > b.right_chars;
  });
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(all.size());
  for (const Candidate& c : all) merges.emplace_back(tokens[c.left], tokens[c.right]);
  return merges;
}

// tokenizer.ggml.merges as (left, right) pairs; no token of these vocabularies holds a space.
Result<std::vector<std::pair<std::string, std::string>>> parse_merges(
    const std::vector<std::string>& lines) {
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(lines.size());
  for (const std::string& m : lines) {
    const size_t space = m.find(' ');
    if (space == std::string::npos) {
      return Error{"GGUF tokenizer.ggml.merges entry '" + m + "' is not two tokens"};
    }
    merges.emplace_back(m.substr(0, space), m.substr(space + 1));
  }
  return merges;
}

// SentencePiece-style BPE over raw UTF-8: spaces become "▁" (after a "▁" prefix when
// add_space_prefix), characters missing from the vocabulary fall back to <0xXX> tokens, and the
// decoder undoes both. No pre-tokenizer: merges run over the whole normalized text.
void sentencepiece_pipeline(const GgufVocab& vocab, bool add_space_prefix, TokenizerParts& parts,
                            BpeOptions& options) {
  std::vector<std::unique_ptr<Normalizer>> norms;
  if (add_space_prefix) norms.emplace_back(new PrependNormalizer(kSentencePieceSpace));
  norms.emplace_back(new ReplaceNormalizer(" ", nullptr, kSentencePieceSpace));
  parts.normalizer.reset(new SequenceNormalizer(std::move(norms)));
  if (vocab.unk_id) options.unk_token = vocab.tokens[*vocab.unk_id];
  options.byte_fallback = true;
  options.fuse_unk = true;
  std::vector<std::unique_ptr<Decoder>> decoders;
  decoders.emplace_back(new ReplaceDecoder(kSentencePieceSpace, " "));
  decoders.emplace_back(new ByteFallbackDecoder());
  decoders.emplace_back(new FuseDecoder());
  if (add_space_prefix) decoders.emplace_back(new StripDecoder(" ", 1, 0));
  parts.decoder.reset(new SequenceDecoder(std::move(decoders)));
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_gguf_vocab(const GgufVocab& vocab) {
  const auto& tokens = vocab.tokens;
  if (tokens.empty()) return Error{"the GGUF file has no tokenizer.ggml.tokens"};
  if (!vocab.token_types.empty() && vocab.token_types.size() != tokens.size()) {
    return Error{"GGUF tokenizer.ggml.token_type has " + std::to_string(vocab.token_types.size()) +
                 " entries for " + std::to_string(tokens.size()) + " tokens"};
  }
  const auto in_range = [&](std::optional<int32_t> id) {
    return !id || (*id >= 0 && static_cast<size_t>(*id) < tokens.size());
  };
  if (!in_range(vocab.bos_id) || !in_range(vocab.eos_id) || !in_range(vocab.unk_id)) {
    return Error{"a GGUF tokenizer.ggml.*_token_id is outside the vocabulary"};
  }
  auto parts = std::make_unique<TokenizerParts>();
  std::unordered_map<std::string, int32_t> ids;
  ids.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) ids.emplace(tokens[i], static_cast<int32_t>(i));

  BpeOptions options;
  std::vector<std::pair<std::string, std::string>> merges;
  bool default_add_bos = false;
  bool force_add_bos = false;
  const bool spm = vocab.model == "llama";
  if (vocab.model == "gpt2") {
    LM_ASSIGN_OR_RETURN(default_add_bos, byte_level_pipeline(vocab.pre, *parts, options));
    LM_ASSIGN_OR_RETURN(merges, parse_merges(vocab.merges));
    parts->decoder.reset(new ByteLevelDecoder());
  } else if (spm) {
    if (vocab.scores.size() != tokens.size()) {
      return Error{
          "GGUF tokenizer.ggml.scores must have one score per token for a 'llama' vocabulary"};
    }
    default_add_bos = true;
    sentencepiece_pipeline(vocab, vocab.add_space_prefix.value_or(true), *parts, options);
    merges = merges_from_scores(tokens, vocab.scores);
  } else if (vocab.model == "gemma4") {
    // Gemma 4's tokenizer.json (transformers' GemmaTokenizer): spaces to "▁" with no prefix, BPE
    // with its own merges, byte fallback; its Split(" ") pre-tokenizer sees no space left.
    if (vocab.merges.empty()) {
      return Error{"GGUF tokenizer.ggml.merges is missing for a 'gemma4' vocabulary"};
    }
    sentencepiece_pipeline(vocab, /*add_space_prefix=*/false, *parts, options);
    LM_ASSIGN_OR_RETURN(merges, parse_merges(vocab.merges));
    // NOTE: Gemma 4 always starts with <bos>; some converted files say add_bos_token false, which
    // llama.cpp overrides too.
    force_add_bos = true;
  } else {
    return Error{"GGUF tokenizer.ggml.model '" + vocab.model +
                 "' is not supported (supported: gpt2, llama, gemma4)"};
  }
  auto model = BpeModel::create(std::move(ids), merges, std::move(options));
  if (!model.ok()) return Error{"GGUF vocabulary: " + model.error().message};
  parts->model.emplace(std::move(model).value());

  for (size_t i = 0; i < vocab.token_types.size(); ++i) {
    const int32_t type = vocab.token_types[i];
    const bool special = type == kTypeControl || (spm && type == kTypeUnknown);
    if (special || type == kTypeUserDefined) {
      AddedToken token;
      token.id = static_cast<int32_t>(i);
      token.content = tokens[i];
      token.special = special;
      parts->added_tokens.push_back(std::move(token));
    }
  }
  const bool add_bos = force_add_bos || vocab.add_bos.value_or(default_add_bos);
  const bool add_eos = vocab.add_eos.value_or(false);
  if (add_bos && vocab.bos_id) parts->prefix_ids.push_back(*vocab.bos_id);
  if (add_eos && vocab.eos_id) parts->suffix_ids.push_back(*vocab.eos_id);
  parts->bos_id = vocab.bos_id;
  parts->eos_id = vocab.eos_id;
  parts->chat_template = vocab.chat_template;
  parts->tool_use_template = vocab.tool_use_template;
  return from_parts(std::move(parts));
}

}  // namespace lm
