// Tokenizer::from_tokenizer_json: builds the pipeline from HF tokenizer.json (+ the bos/eos tokens
// and chat template of tokenizer_config.json). Unknown component types are errors naming them.
#include <nlohmann/json.hpp>

#include "base/text_file.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_config.h"
#include "tokenizer/tokenizer_parts.h"

namespace lm {
namespace {

using Json = nlohmann::json;

// Typed field access with errors that name the JSON path.
class Fields {
 public:
  Fields(const Json& object, std::string path) : object_(object), path_(std::move(path)) {}

  const Json* find(const char* key) const {
    auto it = object_.find(key);
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }
  Result<std::string> string(const char* key) const {
    const Json* v = find(key);
    if (v == nullptr) return Error{where(key) + " is missing"};
    if (!v->is_string()) return Error{where(key) + " must be a string"};
    return v->get<std::string>();
  }
  Result<std::optional<std::string>> optional_string(const char* key) const {
    const Json* v = find(key);
    if (v == nullptr) return std::optional<std::string>();
    if (!v->is_string()) return Error{where(key) + " must be a string or null"};
    return std::optional<std::string>(v->get<std::string>());
  }
  Result<bool> boolean(const char* key, bool fallback) const {
    const Json* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) return Error{where(key) + " must be true or false"};
    return v->get<bool>();
  }
  Result<int64_t> integer(const char* key, std::optional<int64_t> fallback = {}) const {
    const Json* v = find(key);
    if (v == nullptr) {
      if (fallback) return *fallback;
      return Error{where(key) + " is missing"};
    }
    if (!v->is_number_integer()) return Error{where(key) + " must be an integer"};
    return v->get<int64_t>();
  }
  Result<const Json*> array(const char* key) const {
    const Json* v = find(key);
    if (v == nullptr || !v->is_array()) return Error{where(key) + " must be an array"};
    return v;
  }
  std::string where(const char* key) const { return "tokenizer.json: " + path_ + "." + key; }
  const std::string& path() const { return path_; }

 private:
  const Json& object_;
  std::string path_;
};

Result<Fields> object_at(const Json& value, const std::string& path) {
  if (!value.is_object()) return Error{"tokenizer.json: " + path + " must be an object"};
  return Fields(value, path);
}

std::string type_of(const Json& value) {
  auto it = value.find("type");
  return it != value.end() && it->is_string() ? it->get<std::string>() : "";
}

Error unknown_type(const std::string& path, const std::string& type, const char* supported) {
  return Error{"tokenizer.json: " + path + " has the type '" + type +
               "', which this tokenizer does not implement (supported: " + supported + ")"};
}

// {"String": "..."} or {"Regex": "..."}: a literal, or a compiled regex.
struct Pattern {
  std::string literal;
  std::unique_ptr<Regex> regex;
};
Result<Pattern> read_pattern(const Fields& f) {
  const Json* p = f.find("pattern");
  if (p == nullptr || !p->is_object()) return Error{f.where("pattern") + " must be an object"};
  Pattern pattern;
  if (auto it = p->find("String"); it != p->end() && it->is_string()) {
    pattern.literal = it->get<std::string>();
  } else if (auto re = p->find("Regex"); re != p->end() && re->is_string()) {
    LM_ASSIGN_OR_RETURN(pattern.regex, Regex::compile(re->get<std::string>()));
  } else {
    return Error{f.where("pattern") + " must hold a \"String\" or a \"Regex\""};
  }
  return pattern;
}

Result<std::unique_ptr<Normalizer>> read_normalizer(const Json& value, const std::string& path) {
  LM_ASSIGN_OR_RETURN(Fields f, object_at(value, path));
  const std::string type = type_of(value);
  if (type == "Sequence") {
    LM_ASSIGN_OR_RETURN(const Json* list, f.array("normalizers"));
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (size_t i = 0; i < list->size(); ++i) {
      LM_ASSIGN_OR_RETURN(
          auto step, read_normalizer((*list)[i], path + ".normalizers[" + std::to_string(i) + "]"));
      steps.push_back(std::move(step));
    }
    return std::unique_ptr<Normalizer>(new SequenceNormalizer(std::move(steps)));
  }
  if (type == "Prepend") {
    LM_ASSIGN_OR_RETURN(std::string prepend, f.string("prepend"));
    return std::unique_ptr<Normalizer>(new PrependNormalizer(std::move(prepend)));
  }
  if (type == "Replace") {
    LM_ASSIGN_OR_RETURN(Pattern pattern, read_pattern(f));
    LM_ASSIGN_OR_RETURN(std::string content, f.string("content"));
    return std::unique_ptr<Normalizer>(new ReplaceNormalizer(
        std::move(pattern.literal), std::move(pattern.regex), std::move(content)));
  }
  using Form = UnicodeNormalizer::Form;
  if (type == "NFC") return std::unique_ptr<Normalizer>(new UnicodeNormalizer(Form::kNfc));
  if (type == "NFD") return std::unique_ptr<Normalizer>(new UnicodeNormalizer(Form::kNfd));
  if (type == "NFKC") return std::unique_ptr<Normalizer>(new UnicodeNormalizer(Form::kNfkc));
  if (type == "NFKD") return std::unique_ptr<Normalizer>(new UnicodeNormalizer(Form::kNfkd));
  if (type == "Lowercase") {
    return std::unique_ptr<Normalizer>(new UnicodeNormalizer(Form::kLowercase));
  }
  if (type == "Strip") {
    LM_ASSIGN_OR_RETURN(bool left, f.boolean("strip_left", true));
    LM_ASSIGN_OR_RETURN(bool right, f.boolean("strip_right", true));
    return std::unique_ptr<Normalizer>(new StripNormalizer(left, right));
  }
  return unknown_type(path, type,
                      "Sequence, Prepend, Replace, NFC, NFD, NFKC, NFKD, Lowercase, Strip");
}

Result<std::unique_ptr<PreTokenizer>> read_pre_tokenizer(const Json& value,
                                                         const std::string& path) {
  LM_ASSIGN_OR_RETURN(Fields f, object_at(value, path));
  const std::string type = type_of(value);
  if (type == "Sequence") {
    LM_ASSIGN_OR_RETURN(const Json* list, f.array("pretokenizers"));
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (size_t i = 0; i < list->size(); ++i) {
      LM_ASSIGN_OR_RETURN(auto step, read_pre_tokenizer((*list)[i], path + ".pretokenizers[" +
                                                                        std::to_string(i) + "]"));
      steps.push_back(std::move(step));
    }
    return std::unique_ptr<PreTokenizer>(new SequencePreTokenizer(std::move(steps)));
  }
  if (type == "Split") {
    LM_ASSIGN_OR_RETURN(Pattern pattern, read_pattern(f));
    LM_ASSIGN_OR_RETURN(std::string behavior_name, f.string("behavior"));
    SplitBehavior behavior;
    if (behavior_name == "Removed") {
      behavior = SplitBehavior::kRemoved;
    } else if (behavior_name == "Isolated") {
      behavior = SplitBehavior::kIsolated;
    } else if (behavior_name == "MergedWithPrevious") {
      behavior = SplitBehavior::kMergedWithPrevious;
    } else if (behavior_name == "MergedWithNext") {
      behavior = SplitBehavior::kMergedWithNext;
    } else if (behavior_name == "Contiguous") {
      behavior = SplitBehavior::kContiguous;
    } else {
      return Error{f.where("behavior") + " is '" + behavior_name + "', not a split behavior"};
    }
    LM_ASSIGN_OR_RETURN(bool invert, f.boolean("invert", false));
    return std::unique_ptr<PreTokenizer>(new SplitPreTokenizer(
        std::move(pattern.regex), std::move(pattern.literal), behavior, invert));
  }
  if (type == "ByteLevel") {
    LM_ASSIGN_OR_RETURN(bool add_prefix_space, f.boolean("add_prefix_space", true));
    LM_ASSIGN_OR_RETURN(bool use_regex, f.boolean("use_regex", true));
    std::unique_ptr<Regex> regex;
    if (use_regex) {
      LM_ASSIGN_OR_RETURN(regex, Regex::compile(kGpt2SplitRegex));
    }
    return std::unique_ptr<PreTokenizer>(
        new ByteLevelPreTokenizer(add_prefix_space, std::move(regex)));
  }
  if (type == "Digits") {
    LM_ASSIGN_OR_RETURN(bool individual, f.boolean("individual_digits", false));
    return std::unique_ptr<PreTokenizer>(new DigitsPreTokenizer(individual));
  }
  if (type == "Metaspace") {
    LM_ASSIGN_OR_RETURN(std::string replacement, f.string("replacement"));
    // HF's replacement is one character; an empty one would split the text at offset 0 forever.
    if (replacement.empty()) return Error{f.where("replacement") + " must not be empty"};
    LM_ASSIGN_OR_RETURN(bool split, f.boolean("split", true));
    LM_ASSIGN_OR_RETURN(auto scheme, f.optional_string("prepend_scheme"));
    LM_ASSIGN_OR_RETURN(bool add_prefix_space, f.boolean("add_prefix_space", true));
    auto prepend = add_prefix_space ? MetaspacePreTokenizer::Prepend::kAlways
                                    : MetaspacePreTokenizer::Prepend::kNever;
    if (scheme) {
      if (*scheme == "first") {
        prepend = MetaspacePreTokenizer::Prepend::kFirst;
      } else if (*scheme == "never") {
        prepend = MetaspacePreTokenizer::Prepend::kNever;
      } else if (*scheme == "always") {
        prepend = MetaspacePreTokenizer::Prepend::kAlways;
      } else {
        return Error{f.where("prepend_scheme") + " is '" + *scheme + "'"};
      }
    }
    return std::unique_ptr<PreTokenizer>(
        new MetaspacePreTokenizer(std::move(replacement), prepend, split));
  }
  return unknown_type(path, type, "Sequence, Split, ByteLevel, Digits, Metaspace");
}

Result<std::unique_ptr<Decoder>> read_decoder(const Json& value, const std::string& path) {
  LM_ASSIGN_OR_RETURN(Fields f, object_at(value, path));
  const std::string type = type_of(value);
  if (type == "Sequence") {
    LM_ASSIGN_OR_RETURN(const Json* list, f.array("decoders"));
    std::vector<std::unique_ptr<Decoder>> steps;
    for (size_t i = 0; i < list->size(); ++i) {
      LM_ASSIGN_OR_RETURN(auto step,
                          read_decoder((*list)[i], path + ".decoders[" + std::to_string(i) + "]"));
      steps.push_back(std::move(step));
    }
    return std::unique_ptr<Decoder>(new SequenceDecoder(std::move(steps)));
  }
  if (type == "ByteLevel") return std::unique_ptr<Decoder>(new ByteLevelDecoder());
  if (type == "ByteFallback") return std::unique_ptr<Decoder>(new ByteFallbackDecoder());
  if (type == "Fuse") return std::unique_ptr<Decoder>(new FuseDecoder());
  if (type == "Replace") {
    LM_ASSIGN_OR_RETURN(Pattern pattern, read_pattern(f));
    if (pattern.regex)
      return Error{f.where("pattern") + ": a Regex pattern in a decoder is not supported"};
    LM_ASSIGN_OR_RETURN(std::string content, f.string("content"));
    return std::unique_ptr<Decoder>(
        new ReplaceDecoder(std::move(pattern.literal), std::move(content)));
  }
  if (type == "Strip") {
    LM_ASSIGN_OR_RETURN(std::string content, f.string("content"));
    LM_ASSIGN_OR_RETURN(int64_t start, f.integer("start", 0));
    LM_ASSIGN_OR_RETURN(int64_t stop, f.integer("stop", 0));
    if (start < 0 || stop < 0) return Error{"tokenizer.json: " + path + ": negative strip count"};
    return std::unique_ptr<Decoder>(new StripDecoder(std::move(content), start, stop));
  }
  if (type == "Metaspace") {
    LM_ASSIGN_OR_RETURN(std::string replacement, f.string("replacement"));
    LM_ASSIGN_OR_RETURN(auto scheme, f.optional_string("prepend_scheme"));
    LM_ASSIGN_OR_RETURN(bool add_prefix_space, f.boolean("add_prefix_space", true));
    const bool strip_first = scheme ? *scheme != "never" : add_prefix_space;
    return std::unique_ptr<Decoder>(new MetaspaceDecoder(std::move(replacement), strip_first));
  }
  return unknown_type(path, type,
                      "Sequence, ByteLevel, ByteFallback, Fuse, Replace, Strip, Metaspace");
}

// The ids a post-processor adds around a single sequence.
Status read_post_processor(const Json& value, const std::string& path, TokenizerParts& parts) {
  LM_ASSIGN_OR_RETURN(Fields f, object_at(value, path));
  const std::string type = type_of(value);
  if (type == "ByteLevel") return {};  // only adjusts offsets
  if (type == "Sequence") {
    LM_ASSIGN_OR_RETURN(const Json* list, f.array("processors"));
    for (size_t i = 0; i < list->size(); ++i) {
      LM_RETURN_IF_ERROR(
          read_post_processor((*list)[i], path + ".processors[" + std::to_string(i) + "]", parts));
    }
    return {};
  }
  if (type == "TemplateProcessing") {
    LM_ASSIGN_OR_RETURN(const Json* single, f.array("single"));
    const Json* specials = f.find("special_tokens");
    bool seen_sequence = false;
    for (const Json& item : *single) {
      if (item.is_object() && item.contains("Sequence")) {
        seen_sequence = true;
        continue;
      }
      const Json* special = nullptr;
      if (item.is_object() && item.contains("SpecialToken")) special = &item["SpecialToken"];
      if (special == nullptr || !special->is_object() || !special->contains("id") ||
          !(*special)["id"].is_string()) {
        return Error{f.where("single") +
                     " items must be {\"Sequence\": ...} or {\"SpecialToken\": {\"id\": ...}}"};
      }
      const std::string name = (*special)["id"].get<std::string>();
      if (specials == nullptr || !specials->is_object() || !specials->contains(name) ||
          !(*specials)[name].is_object() || !(*specials)[name].contains("ids") ||
          !(*specials)[name]["ids"].is_array()) {
        return Error{f.where("special_tokens") + " does not define the ids of '" + name + "'"};
      }
      for (const Json& id : (*specials)[name]["ids"]) {
        if (!id.is_number_integer())
          return Error{f.where("special_tokens") + " ids must be integers"};
        (seen_sequence ? parts.suffix_ids : parts.prefix_ids).push_back(id.get<int32_t>());
      }
    }
    return {};
  }
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    for (const char* key : {"cls", "sep"}) {
      const Json* v = f.find(key);
      if (v == nullptr || !v->is_array() || v->size() != 2 || !(*v)[1].is_number_integer()) {
        return Error{f.where(key) + " must be [token, id]"};
      }
      (std::string(key) == "cls" ? parts.prefix_ids : parts.suffix_ids)
          .push_back((*v)[1].get<int32_t>());
    }
    return {};
  }
  return unknown_type(path, type,
                      "TemplateProcessing, ByteLevel, Sequence, RobertaProcessing, BertProcessing");
}

Status read_model(const Json& value, TokenizerParts& parts) {
  LM_ASSIGN_OR_RETURN(Fields f, object_at(value, "model"));
  std::string type = type_of(value);
  if (type.empty() && value.contains("merges")) type = "BPE";  // files from before "type"
  if (type != "BPE") return unknown_type("model", type, "BPE");
  const Json* vocab_json = f.find("vocab");
  if (vocab_json == nullptr) return Error{f.where("vocab") + " is missing"};
  if (!vocab_json->is_object()) return Error{f.where("vocab") + " must be an object {token: id}"};
  std::unordered_map<std::string, int32_t> vocab;
  vocab.reserve(vocab_json->size());
  for (const auto& [token, id] : vocab_json->items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= (1 << 24)) {
      return Error{f.where("vocab") + "['" + token + "'] must be an integer id in [0, 2^24)"};
    }
    vocab.emplace(token, static_cast<int32_t>(id.get<int64_t>()));
  }
  std::vector<std::pair<std::string, std::string>> merges;
  if (const Json* list = f.find("merges")) {
    if (!list->is_array()) return Error{f.where("merges") + " must be an array"};
    merges.reserve(list->size());
    for (size_t i = 0; i < list->size(); ++i) {
      const Json& m = (*list)[i];
      if (m.is_string()) {  // "left right"
        const std::string s = m.get<std::string>();
        const size_t space = s.find(' ');
        if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
          return Error{f.where("merges") + "[" + std::to_string(i) + "] '" + s +
                       "' is not two tokens separated by one space"};
        }
        merges.emplace_back(s.substr(0, space), s.substr(space + 1));
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
      } else {
        return Error{f.where("merges") + "[" + std::to_string(i) +
                     "] must be \"a b\" or [\"a\", \"b\"]"};
      }
    }
  }
  BpeOptions options;
  LM_ASSIGN_OR_RETURN(options.unk_token, f.optional_string("unk_token"));
  LM_ASSIGN_OR_RETURN(options.byte_fallback, f.boolean("byte_fallback", false));
  LM_ASSIGN_OR_RETURN(options.fuse_unk, f.boolean("fuse_unk", false));
  LM_ASSIGN_OR_RETURN(options.ignore_merges, f.boolean("ignore_merges", false));
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    LM_ASSIGN_OR_RETURN(auto affix, f.optional_string(key));
    if (affix && !affix->empty()) return Error{f.where(key) + " is not supported"};
  }
  if (const Json* dropout = f.find("dropout");
      dropout != nullptr && dropout->is_number() && dropout->get<double>() > 0.0) {
    return Error{f.where("dropout") + ": BPE dropout is not supported for inference"};
  }
  auto model = BpeModel::create(std::move(vocab), merges, std::move(options));
  if (!model.ok()) return Error{"tokenizer.json: model: " + model.error().message};
  parts.model.emplace(std::move(model).value());
  return {};
}

Status read_added_tokens(const Json& root, TokenizerParts& parts) {
  auto it = root.find("added_tokens");
  if (it == root.end() || it->is_null()) return {};
  if (!it->is_array()) return Error{"tokenizer.json: added_tokens must be an array"};
  for (size_t i = 0; i < it->size(); ++i) {
    const std::string path = "added_tokens[" + std::to_string(i) + "]";
    LM_ASSIGN_OR_RETURN(Fields f, object_at((*it)[i], path));
    AddedToken token;
    LM_ASSIGN_OR_RETURN(int64_t id, f.integer("id"));
    token.id = static_cast<int32_t>(id);
    LM_ASSIGN_OR_RETURN(token.content, f.string("content"));
    LM_ASSIGN_OR_RETURN(token.special, f.boolean("special", false));
    LM_ASSIGN_OR_RETURN(token.lstrip, f.boolean("lstrip", false));
    LM_ASSIGN_OR_RETURN(token.rstrip, f.boolean("rstrip", false));
    LM_ASSIGN_OR_RETURN(token.normalized, f.boolean("normalized", !token.special));
    LM_ASSIGN_OR_RETURN(token.single_word, f.boolean("single_word", false));
    parts.added_tokens.push_back(std::move(token));
  }
  return {};
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_json_strings(std::string_view tokenizer_json,
                                                                std::string_view config_json) {
  Json root;
  try {
    root = Json::parse(tokenizer_json);
  } catch (const Json::exception& e) {
    return Error{std::string("tokenizer.json is not valid JSON: ") + e.what()};
  }
  if (!root.is_object()) return Error{"tokenizer.json must hold a JSON object"};
  auto parts = std::make_unique<TokenizerParts>();
  auto model = root.find("model");
  if (model == root.end() || model->is_null()) return Error{"tokenizer.json has no \"model\""};
  LM_RETURN_IF_ERROR(read_model(*model, *parts));
  LM_RETURN_IF_ERROR(read_added_tokens(root, *parts));
  if (auto it = root.find("normalizer"); it != root.end() && !it->is_null()) {
    LM_ASSIGN_OR_RETURN(parts->normalizer, read_normalizer(*it, "normalizer"));
  }
  if (auto it = root.find("pre_tokenizer"); it != root.end() && !it->is_null()) {
    LM_ASSIGN_OR_RETURN(parts->pre_tokenizer, read_pre_tokenizer(*it, "pre_tokenizer"));
  }
  if (auto it = root.find("post_processor"); it != root.end() && !it->is_null()) {
    LM_RETURN_IF_ERROR(read_post_processor(*it, "post_processor", *parts));
  }
  if (auto it = root.find("decoder"); it != root.end() && !it->is_null()) {
    LM_ASSIGN_OR_RETURN(parts->decoder, read_decoder(*it, "decoder"));
  }

  LM_ASSIGN_OR_RETURN(TokenizerConfig config,
                      parse_tokenizer_config(config_json, "tokenizer_config.json"));
  parts->chat_template = config.chat_template;
  parts->tool_use_template = config.tool_use_template;
  // Resolved against added tokens first, then the model vocabulary.
  auto resolve = [&](const std::string& text) -> std::optional<int32_t> {
    for (const AddedToken& t : parts->added_tokens) {
      if (t.content == text) return t.id;
    }
    return parts->model->token_to_id(text);
  };
  if (config.bos_token) parts->bos_id = resolve(*config.bos_token);
  if (config.eos_token) parts->eos_id = resolve(*config.eos_token);
  if (!parts->bos_id && !parts->prefix_ids.empty()) parts->bos_id = parts->prefix_ids.front();
  if (!parts->eos_id && !parts->suffix_ids.empty()) parts->eos_id = parts->suffix_ids.back();
  return from_parts(std::move(parts));
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_tokenizer_json(
    const std::string& tokenizer_json_path, const std::string& tokenizer_config_json_path) {
  LM_ASSIGN_OR_RETURN(std::string json, read_text_file(tokenizer_json_path));
  std::string config;
  if (!tokenizer_config_json_path.empty() && file_exists(tokenizer_config_json_path)) {
    LM_ASSIGN_OR_RETURN(config, read_text_file(tokenizer_config_json_path));
  }
  auto result = from_json_strings(json, config);
  if (!result.ok()) return Error{tokenizer_json_path + ": " + result.error().message};
  return result;
}

}  // namespace lm
