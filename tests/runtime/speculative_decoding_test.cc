// Speculative decoding through the Engine and the ModelExecutor on real checkpoints: every
// request (greedy, penalized with top tokens, seeded sampling, stopping at EOS) gets the tokens it
// gets without speculation, proposals are accepted, and rejected ones leave no trace, through a
// KV pool so small that sequences are preempted. The same bits where the kernels are
// batch-invariant (int8 activations over quantized weights, 16-bit panels); over fp32 rows the
// same ids with close logprobs (model/speculative_rows_test.cc says why).
#include <gtest/gtest.h>

#include <cctype>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "../grammar/gguf_test_tokenizer.h"
#include "collecting_sink.h"
#include "engine/engine.h"
#include "engine/run_to_completion.h"
#include "grammar/grammar_compiler.h"
#include "grammar/grammar_vocab.h"
#include "runtime/draft_proposer.h"
#include "runtime/model_executor.h"

namespace lm {
namespace {

namespace fs = std::filesystem;

const fs::path kTestModels = fs::path(LM_BUILD_ROOT) / "test-models";

using testing_helpers::CollectingSink;

struct Outcome {
  std::vector<GenerationResult> results;
  EngineStats stats;
};

// Every request submitted at once to an Engine of its own; num_blocks > 0 shrinks the KV pool to
// that many blocks of 4 tokens. With a `draft` model it makes the proposals (its own pool as
// large as the target's), else prompt lookup.
Outcome generate(LlamaModel& model, const std::vector<EngineRequest>& requests, int64_t speculate,
                 int64_t num_blocks = 0, LlamaModel* draft = nullptr) {
  ThreadPool pool(2);
  EngineConfig config;
  config.max_batch_total_tokens = 2048;
  config.eos_token_ids = model.config().eos_token_ids;
  config.speculate = speculate;
  if (num_blocks > 0) {
    config.block_size = 4;
    config.num_blocks = num_blocks;
  }
  std::unique_ptr<Proposer> proposer;
  if (draft != nullptr) {
    proposer =
        std::make_unique<DraftProposer>(*draft, pool, kv_num_blocks(config), config.block_size,
                                        DType::kF16, model.config().vocab_size);
  }
  Engine engine(config, std::make_unique<ModelExecutor>(model, pool, config), {},
                std::move(proposer));
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  for (const EngineRequest& request : requests) {
    sinks.push_back(std::make_shared<CollectingSink>());
    EXPECT_TRUE(engine.submit(request, sinks.back()).ok());
  }
  Outcome outcome;
  for (const auto& sink : sinks) outcome.results.push_back(sink->wait(std::chrono::seconds(120)));
  engine.drain();
  outcome.stats = engine.stats();
  return outcome;
}

// A phrase repeated (the model, even a random one, tends to go on repeating), then requests of
// every kind over it.
std::vector<EngineRequest> requests(int64_t vocab_size) {
  std::vector<int32_t> phrase;
  for (int32_t id : {17, 250, 3, 99, 41, 7, 123})
    phrase.push_back(id % static_cast<int32_t>(vocab_size));
  auto repeated = [&](int times) {
    std::vector<int32_t> ids;
    for (int i = 0; i < times; ++i) ids.insert(ids.end(), phrase.begin(), phrase.end());
    return ids;
  };
  std::vector<EngineRequest> out(4);
  out[0].prompt_ids = repeated(3);
  out[0].max_new_tokens = 40;
  out[0].ignore_eos = true;
  out[1].prompt_ids = repeated(2);
  out[1].prompt_ids.push_back(5);
  out[1].max_new_tokens = 24;
  out[1].ignore_eos = true;
  out[1].sampling.repetition_penalty = 1.3f;
  out[1].sampling.top_n_tokens = 3;
  out[2].prompt_ids = repeated(2);
  out[2].max_new_tokens = 24;
  out[2].ignore_eos = true;
  out[2].sampling.do_sample = true;
  out[2].sampling.seed = 42;
  out[2].sampling.temperature = 0.8f;
  out[2].sampling.top_k = 20;
  out[3].prompt_ids = repeated(4);
  out[3].max_new_tokens = 32;
  return out;
}

void expect_same(const Outcome& got, const Outcome& want, bool same_bits) {
  ASSERT_EQ(got.results.size(), want.results.size());
  for (size_t i = 0; i < want.results.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    const std::vector<SampleResult>& a = got.results[i].tokens;
    const std::vector<SampleResult>& b = want.results[i].tokens;
    EXPECT_EQ(got.results[i].finish_reason, want.results[i].finish_reason);
    ASSERT_EQ(a.size(), b.size());
    for (size_t t = 0; t < b.size(); ++t) {
      SCOPED_TRACE("token " + std::to_string(t));
      ASSERT_EQ(a[t].id, b[t].id);
      if (same_bits) {
        EXPECT_EQ(a[t].logprob, b[t].logprob);
      } else {
        EXPECT_NEAR(a[t].logprob, b[t].logprob, 1e-4);
      }
      ASSERT_EQ(a[t].top_tokens.size(), b[t].top_tokens.size());
      for (size_t k = 0; k < b[t].top_tokens.size(); ++k) {
        EXPECT_EQ(a[t].top_tokens[k].id, b[t].top_tokens[k].id);
        if (same_bits) {
          EXPECT_EQ(a[t].top_tokens[k].logprob, b[t].top_tokens[k].logprob);
        }
      }
    }
  }
}

std::unique_ptr<LlamaModel> load(const fs::path& path) {
  auto loaded = LlamaModel::load(path.string());
  EXPECT_TRUE(loaded.ok()) << loaded.error().message << " (run `make fixtures-test`)";
  return loaded.ok() ? std::move(loaded).value() : nullptr;
}

TEST(SpeculativeDecoding, QuantizedTinyModelGivesTheSameBitsAndAcceptsProposals) {
  std::unique_ptr<LlamaModel> model = load(kTestModels / "kquant-gguf" / "model-kquants.gguf");
  ASSERT_NE(model, nullptr);
  model->set_int8_activations(true);
  const std::vector<EngineRequest> reqs = requests(model->config().vocab_size);
  const Outcome plain = generate(*model, reqs, 0);
  const Outcome speculative = generate(*model, reqs, 3);
  expect_same(speculative, plain, /*same_bits=*/true);
  EXPECT_EQ(plain.stats.num_proposed_tokens, 0);
  EXPECT_GT(speculative.stats.num_accepted_tokens, 0);
  // Through preemption and recompute in a pool of 24 blocks of 4 tokens.
  const Outcome small = generate(*model, reqs, 3, /*num_blocks=*/24);
  expect_same(small, plain, /*same_bits=*/true);
  EXPECT_GT(small.stats.num_preemptions, 0);
  EXPECT_GT(small.stats.num_accepted_tokens, 0);
}

// A draft model proposes (--speculative-model-id): the target's F32 twin (close logits: most
// proposals accepted) and a model of other weights (few accepted). Either way the target's
// outputs are those of plain decoding, through preemption in a small pool too.
TEST(SpeculativeDecoding, ADraftModelGivesTheSameBits) {
  std::unique_ptr<LlamaModel> model = load(kTestModels / "kquant-gguf" / "model-kquants.gguf");
  std::unique_ptr<LlamaModel> twin = load(kTestModels / "kquant-gguf" / "model-f32.gguf");
  std::unique_ptr<LlamaModel> other = load(kTestModels / "kquant-gguf" / "model-lowbit.gguf");
  ASSERT_TRUE(model && twin && other);
  model->set_int8_activations(true);
  twin->set_int8_activations(true);
  other->set_int8_activations(true);
  const std::vector<EngineRequest> reqs = requests(model->config().vocab_size);
  const Outcome plain = generate(*model, reqs, 0);
  const Outcome close = generate(*model, reqs, 4, 0, twin.get());
  expect_same(close, plain, /*same_bits=*/true);
  const Outcome far = generate(*model, reqs, 4, 0, other.get());
  expect_same(far, plain, /*same_bits=*/true);
  const Outcome small = generate(*model, reqs, 4, /*num_blocks=*/24, twin.get());
  expect_same(small, plain, /*same_bits=*/true);
  EXPECT_GT(small.stats.num_preemptions, 0);
  std::cout << "[ measured ] accepted: twin " << close.stats.num_accepted_tokens << " of "
            << close.stats.num_proposed_tokens << ", other weights "
            << far.stats.num_accepted_tokens << " of " << far.stats.num_proposed_tokens << "\n";
  // The twin's proposals are mostly the target's choices; the other model's far less often.
  EXPECT_GT(close.stats.num_accepted_tokens * 2, close.stats.num_proposed_tokens);
  EXPECT_GT(close.stats.num_accepted_tokens, far.stats.num_accepted_tokens);
}

TEST(SpeculativeDecoding, HalfPanelsGiveTheSameBits) {
  std::unique_ptr<LlamaModel> model = load(kTestModels / "llama_mha_untied");
  ASSERT_NE(model, nullptr);
  ThreadPool pool(2);
  model->convert_float_weights(DType::kF16, pool);
  model->set_int8_activations(true);
  const std::vector<EngineRequest> reqs = requests(model->config().vocab_size);
  const Outcome speculative = generate(*model, reqs, 4);
  expect_same(speculative, generate(*model, reqs, 0), /*same_bits=*/true);
  EXPECT_GT(speculative.stats.num_proposed_tokens, 0);
}

TEST(SpeculativeDecoding, Fp32RowsGiveTheSameTokens) {
  std::unique_ptr<LlamaModel> model = load(kTestModels / "llama_mha_untied");
  ASSERT_NE(model, nullptr);
  model->set_int8_activations(false);
  const std::vector<EngineRequest> reqs = requests(model->config().vocab_size);
  expect_same(generate(*model, reqs, 3), generate(*model, reqs, 0), /*same_bits=*/false);
}

// Every architecture of the fixtures (GQA, MoE, sliding windows, soft-capping, partial and
// scaled RoPE, tied heads, 16-bit and quantized files): greedy, penalized and sampled requests
// give the tokens of plain decoding with proposals verified, through preemption in a small pool.
// Compared as over fp32 rows (ids exactly, logprobs closely): the quantized ones are the same bits
// (above). Models whose RoPE depends on the sequence's length are served without speculation.
class EveryFixture : public testing::TestWithParam<std::string> {};

// `text` with "last s 1" before it for each token s greedy decoding chose after it (last: its
// last token), grown until the choice is one of them: at the first decode step the sequence ends
// in "last s", seen before, so prompt lookup proposes what followed. (Prepending changes what the
// model chooses, so a few rounds; a random model's choice rests mostly on the nearest tokens.)
std::vector<int32_t> proposing_prompt(LlamaModel& model, const std::vector<int32_t>& text) {
  std::vector<int32_t> pairs;
  for (int round = 0; round < 16; ++round) {
    std::vector<EngineRequest> one(1);
    one[0].prompt_ids = pairs;
    one[0].prompt_ids.insert(one[0].prompt_ids.end(), text.begin(), text.end());
    one[0].ignore_eos = true;
    const int32_t next = generate(model, one, 0).results[0].tokens.at(0).id;
    for (size_t i = 0; i < pairs.size(); i += 3)
      if (pairs[i + 1] == next) return one[0].prompt_ids;
    pairs.insert(pairs.end(), {text.back(), next, 1});
  }
  ADD_FAILURE() << "no prompt after which greedy decoding repeats a pair";
  return text;
}

TEST_P(EveryFixture, SpeculationGivesTheTokensOfPlainDecoding) {
  std::unique_ptr<LlamaModel> model = load(kTestModels / GetParam());
  ASSERT_NE(model, nullptr);
  if (model->config().rope.depends_on_length()) {
    GTEST_SKIP() << "RoPE depends on the sequence's length: the server turns speculation off";
  }
  model->set_int8_activations(true);
  const std::vector<EngineRequest> reqs = requests(model->config().vocab_size);
  const Outcome plain = generate(*model, reqs, 0);
  expect_same(generate(*model, reqs, 3), plain, /*same_bits=*/false);
  const Outcome small = generate(*model, reqs, 3, /*num_blocks=*/24);
  expect_same(small, plain, /*same_bits=*/false);
  EXPECT_GT(small.stats.num_preemptions, 0);
  // Some models never repeat the phrase: a prompt after which prompt lookup proposes.
  std::vector<EngineRequest> proposing(1);
  proposing[0].prompt_ids = proposing_prompt(*model, reqs[0].prompt_ids);
  proposing[0].max_new_tokens = 12;
  proposing[0].ignore_eos = true;
  const Outcome speculative = generate(*model, proposing, 3);
  expect_same(speculative, generate(*model, proposing, 0), /*same_bits=*/false);
  EXPECT_GT(speculative.stats.num_proposed_tokens, 0);
}

// Every fixture `make fixtures-test` writes but smollm2-f32 (the default model's shape, 135M fp32
// weights: slow at the scalar level; DefaultModelOnRepeatedText... below covers it quantized).
INSTANTIATE_TEST_SUITE_P(
    SpeculativeDecoding, EveryFixture,
    testing::Values("gemma", "gemma-gguf/model.gguf", "gemma2", "gemma2_2b",
                    "gemma2_2b-gguf/model.gguf", "gemma3", "gemma3_1b", "gemma3_1b-gguf/model.gguf",
                    "kquant-gguf/model-f32.gguf", "kquant-gguf/model-kquants.gguf",
                    "kquant-gguf/model-lowbit.gguf", "kquant-gguf/model-lowbit-f32.gguf",
                    "kquant-gguf/model-moe.gguf", "kquant-gguf/model-moe-f32.gguf", "llama3_rope",
                    "llama_gqa_tied_sharded", "llama_head_dim", "llama_mha_untied",
                    "llama_rope_dynamic", "llama_rope_linear", "mistral", "mixtral",
                    "mixtral-gguf/model.gguf", "phi3", "phi3-gguf/model.gguf", "phi3_longrope",
                    "phi3_longrope-gguf/model.gguf", "phi3_partial_rotary",
                    "phi3_partial_rotary-gguf/model.gguf", "qwen2", "qwen2_moe",
                    "qwen2_moe-gguf/model.gguf", "qwen2_sliding", "qwen2_yarn",
                    "qwen2_yarn-gguf/model.gguf", "qwen2_yarn-gguf-q4_0/model.gguf",
                    "qwen2_yarn-gguf-q4_1/model.gguf", "qwen2_yarn-gguf-q5_0/model.gguf",
                    "qwen2_yarn-gguf-q5_1/model.gguf", "qwen2_yarn-gguf-q8_0/model.gguf", "qwen3",
                    "qwen3-gguf/model.gguf", "qwen3_moe", "qwen3_moe-gguf/model.gguf",
                    "qwen3_moe_dense_layers"),
    [](const testing::TestParamInfo<std::string>& fixture) {
      std::string name = fixture.param;
      for (char& c : name)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      return name;
    });

// The default model continues a repeated phrase by copying it, so proposals are accepted.
TEST(SpeculativeDecoding, DefaultModelOnRepeatedTextGivesTheSameBitsAndAcceptsProposals) {
  std::unique_ptr<LlamaModel> model =
      load(fs::path(LM_REPO_ROOT) / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf");
  ASSERT_NE(model, nullptr);
  model->set_int8_activations(true);
  std::vector<EngineRequest> reqs = requests(model->config().vocab_size);
  reqs.resize(3);  // greedy, penalized, sampled
  for (EngineRequest& r : reqs) r.max_new_tokens = 32;
  const Outcome plain = generate(*model, reqs, 0);
  const Outcome speculative = generate(*model, reqs, 4);
  expect_same(speculative, plain, /*same_bits=*/true);
  // How many are accepted depends on the kernel level (each level's int8 dots round differently,
  // so the sampled request's text differs) and on how many proposals the step latency target let
  // in: measured 15 of 44 at avx512-vnni, 4 of 41 at avx2 and avx512, 9 of 51 at scalar.
  std::cout << "[ measured ] accepted " << speculative.stats.num_accepted_tokens << " of "
            << speculative.stats.num_proposed_tokens << " proposed\n";
  EXPECT_GT(speculative.stats.num_accepted_tokens, 0);
}

// Constrained requests speculate too: each proposal row is sampled under the grammar's mask for
// the state after the proposals before it (the matcher advanced through them, then rolled back).
// A regex that repeats a sentence makes the output repeat, so n-gram proposals match; a JSON
// schema and a seeded sampled request ride along.
TEST(SpeculativeDecoding, ConstrainedRequestsGiveTheSameBitsAndAcceptProposals) {
  const std::string path = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  std::unique_ptr<LlamaModel> model = load(fs::path(LM_REPO_ROOT) / path);
  std::unique_ptr<Tokenizer> tokenizer = load_gguf_tokenizer(path);
  ASSERT_TRUE(model && tokenizer);
  model->set_int8_activations(true);
  GrammarVocab vocab(*tokenizer, static_cast<int32_t>(model->config().vocab_size),
                     model->config().eos_token_ids);
  GrammarCompiler compiler(vocab);
  auto repeat = compiler.compile({GrammarKind::kRegex, "(The cat sat on the mat\\. )+"});
  auto schema = compiler.compile(
      {GrammarKind::kJsonSchema,
       R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},)"
       R"("required":["name","age"]})"});
  ASSERT_TRUE(repeat.ok() && schema.ok());
  std::vector<EngineRequest> reqs(3);
  reqs[0].prompt_ids =
      tokenizer->encode("Write the sentence again and again: The cat sat on the mat.");
  reqs[0].grammar = *repeat;
  reqs[0].max_new_tokens = 48;
  reqs[1] = reqs[0];
  reqs[1].sampling.do_sample = true;
  reqs[1].sampling.seed = 11;
  reqs[1].sampling.temperature = 0.7f;
  reqs[2].prompt_ids = tokenizer->encode("A person as JSON:");
  reqs[2].grammar = *schema;
  reqs[2].max_new_tokens = 32;
  const Outcome plain = generate(*model, reqs, 0);
  const Outcome speculative = generate(*model, reqs, 4);
  expect_same(speculative, plain, /*same_bits=*/true);
  std::cout << "[ measured ] constrained: accepted " << speculative.stats.num_accepted_tokens
            << " of " << speculative.stats.num_proposed_tokens << " proposed\n";
  EXPECT_GT(speculative.stats.num_accepted_tokens, 10);
}

}  // namespace
}  // namespace lm
