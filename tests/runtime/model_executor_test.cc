// ModelExecutor with a real tiny checkpoint, under the Engine and driven by hand-built batches
// (scattered blocks, chunks, preemption and recompute, prefix-cache hits): every
// sequence gets the tokens it gets alone (an Engine running only it); warm-up runs.
#include "runtime/model_executor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "../tokenizer/tiny_vocab.h"
#include "collecting_sink.h"
#include "engine/engine.h"
#include "engine/run_to_completion.h"
#include "grammar/grammar_compiler.h"
#include "grammar/grammar_vocab.h"
#include "runtime/draft_proposer.h"
#include "runtime/warmup.h"

namespace lm {
namespace {

const std::string kModelPath = std::string(LM_BUILD_ROOT) + "/test-models/llama_mha_untied";

using testing_helpers::CollectingSink;

class ModelExecutorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto loaded = LlamaModel::load(kModelPath);
    ASSERT_TRUE(loaded.ok()) << loaded.error().message << " (run `make fixtures-test`)";
    model_ = std::move(loaded).value().release();
    pool_ = new ThreadPool(2);
  }
  static void TearDownTestSuite() {
    delete model_;
    delete pool_;
  }

  // Three requests of different lengths and sampling rules, one of them seeded sampling.
  static std::vector<EngineRequest> requests() {
    std::vector<EngineRequest> out(3);
    out[0].prompt_ids = {1, 17, 250, 3, 99};
    out[0].max_new_tokens = 12;
    out[1].prompt_ids = {1, 5, 6, 7, 8, 300, 301, 302, 40, 41, 42};
    out[1].max_new_tokens = 16;
    out[1].sampling.repetition_penalty = 1.3f;
    out[1].sampling.top_n_tokens = 3;
    out[1].ignore_eos = true;
    out[2].prompt_ids = {1, 383, 0};
    out[2].max_new_tokens = 10;
    out[2].sampling.do_sample = true;
    out[2].sampling.seed = 42;
    out[2].sampling.temperature = 0.8f;
    out[2].sampling.top_k = 20;
    return out;
  }

  // The request by itself: an Engine of its own, so no other sequence ever shares its steps.
  static GenerationResult generate_alone(const EngineRequest& request) {
    EngineConfig config;
    config.max_batch_total_tokens = 1024;
    config.eos_token_ids = model_->config().eos_token_ids;
    Engine engine(config, std::make_unique<ModelExecutor>(*model_, *pool_, config));
    Result<GenerationResult> result = run_to_completion(engine, request);
    EXPECT_TRUE(result.ok()) << result.error().message;
    return std::move(result).value();
  }

  // Submits every request from its own thread at once and collects the results.
  static std::vector<GenerationResult> generate_together(const std::vector<EngineRequest>& reqs,
                                                         int64_t max_batch_prefill_tokens) {
    EngineConfig config;
    config.max_batch_prefill_tokens = max_batch_prefill_tokens;
    config.max_batch_total_tokens = 1024;
    config.eos_token_ids = model_->config().eos_token_ids;
    auto executor = std::make_unique<ModelExecutor>(*model_, *pool_, config);
    ModelExecutor* executor_ptr = executor.get();
    Engine engine(config, std::move(executor));
    std::vector<std::shared_ptr<CollectingSink>> sinks;
    for (size_t i = 0; i < reqs.size(); ++i) sinks.push_back(std::make_shared<CollectingSink>());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < reqs.size(); ++i)
      threads.emplace_back([&, i] { EXPECT_TRUE(engine.submit(reqs[i], sinks[i]).ok()); });
    for (std::thread& t : threads) t.join();
    std::vector<GenerationResult> results;
    for (const auto& sink : sinks) results.push_back(sink->wait());
    engine.drain();
    EXPECT_EQ(executor_ptr->num_sequences(), 0);  // every cache and sampler was released
    EXPECT_EQ(engine.stats().num_running, 0);
    return results;
  }

  static LlamaModel* model_;
  static ThreadPool* pool_;
};

LlamaModel* ModelExecutorTest::model_ = nullptr;
ThreadPool* ModelExecutorTest::pool_ = nullptr;

std::vector<int32_t> ids_of(const GenerationResult& r) {
  std::vector<int32_t> ids;
  for (const SampleResult& t : r.tokens) ids.push_back(t.id);
  return ids;
}

TEST_F(ModelExecutorTest, InterleavedRequestsMatchEachRunAlone) {
  const std::vector<EngineRequest> reqs = requests();
  std::vector<GenerationResult> alone;
  for (const EngineRequest& r : reqs) alone.push_back(generate_alone(r));
  const std::vector<GenerationResult> together = generate_together(reqs, 4096);
  ASSERT_EQ(together.size(), alone.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(ids_of(together[i]), ids_of(alone[i]));
    EXPECT_EQ(together[i].finish_reason, alone[i].finish_reason);
    ASSERT_EQ(together[i].tokens.size(), alone[i].tokens.size());
    for (size_t t = 0; t < alone[i].tokens.size(); ++t) {
      // NOTE: close, not bit-identical: batched rows go through the GEMM path of matmul while a
      // lone decode takes the one-row dot path, which sums in another order.
      EXPECT_NEAR(together[i].tokens[t].logprob, alone[i].tokens[t].logprob, 1e-4);
      ASSERT_EQ(together[i].tokens[t].top_tokens.size(), alone[i].tokens[t].top_tokens.size());
      for (size_t k = 0; k < alone[i].tokens[t].top_tokens.size(); ++k)
        EXPECT_EQ(together[i].tokens[t].top_tokens[k].id, alone[i].tokens[t].top_tokens[k].id);
    }
  }
  EXPECT_EQ(alone[1].tokens.size(), 16u);
  EXPECT_EQ(alone[1].tokens[0].top_tokens.size(), 3u);
}

TEST_F(ModelExecutorTest, ChunkedPrefillGivesTheSameTokens) {
  const std::vector<EngineRequest> reqs = requests();
  // A prefill budget of 4: every prompt but the shortest is computed in several chunks.
  const std::vector<GenerationResult> chunked = generate_together(reqs, 4);
  for (size_t i = 0; i < reqs.size(); ++i) {
    SCOPED_TRACE(i);
    const GenerationResult alone = generate_alone(reqs[i]);
    EXPECT_EQ(ids_of(chunked[i]), ids_of(alone));
    ASSERT_EQ(chunked[i].tokens.size(), alone.tokens.size());
    for (size_t t = 0; t < alone.tokens.size(); ++t)
      EXPECT_NEAR(chunked[i].tokens[t].logprob, alone.tokens[t].logprob, 1e-4);
  }
}

TEST_F(ModelExecutorTest, PromptLogprobsComeWithTheFirstTokenWhateverTheChunks) {
  std::vector<EngineRequest> reqs = requests();
  for (EngineRequest& r : reqs) {
    r.prompt_logprobs = true;
    r.use_prefix_cache = false;
  }
  const std::vector<GenerationResult> whole = generate_together(reqs, 4096);
  // Chunks of 4 prompt tokens, each step mixing the three requests' chunks and decodes.
  const std::vector<GenerationResult> chunked = generate_together(reqs, 4);
  for (size_t i = 0; i < reqs.size(); ++i) {
    SCOPED_TRACE(i);
    const EngineRequest& r = reqs[i];
    const GenerationResult alone = generate_alone(r);
    EngineRequest plain = r;
    plain.prompt_logprobs = false;
    // Asking for them changes no generated token.
    EXPECT_EQ(ids_of(alone), ids_of(generate_alone(plain)));
    ASSERT_FALSE(alone.tokens.empty());
    const std::vector<float>& lp = alone.tokens[0].prompt_logprobs;
    ASSERT_EQ(lp.size(), r.prompt_ids.size() - 1);
    for (float x : lp) {
      EXPECT_TRUE(std::isfinite(x));
      EXPECT_LE(x, 0.0f);
    }
    for (size_t t = 1; t < alone.tokens.size(); ++t)
      EXPECT_TRUE(alone.tokens[t].prompt_logprobs.empty());
    for (const GenerationResult* other : {&whole[i], &chunked[i]}) {
      EXPECT_EQ(ids_of(*other), ids_of(alone));
      ASSERT_EQ(other->tokens[0].prompt_logprobs.size(), lp.size());
      for (size_t k = 0; k < lp.size(); ++k)
        EXPECT_NEAR(other->tokens[0].prompt_logprobs[k], lp[k], 1e-4);
    }
  }
  // The first prompt token has no logprob; the second's is the log-softmax at position 0, which
  // a one-token request's first sampled token (greedy, unprocessed) shows too.
  EngineRequest one;
  one.prompt_ids = {reqs[0].prompt_ids[0]};
  one.max_new_tokens = 1;
  one.sampling.top_n_tokens = 5;
  const GenerationResult first = generate_alone(one);
  const std::vector<float> lp0 = generate_alone(reqs[0]).tokens[0].prompt_logprobs;
  bool found = false;
  for (const TokenLogprob& alt : first.tokens[0].top_tokens) {
    if (alt.id == reqs[0].prompt_ids[1]) {
      EXPECT_NEAR(alt.logprob, lp0[0], 1e-4);
      found = true;
    }
  }
  if (!found) {
    EXPECT_LT(lp0[0], first.tokens[0].top_tokens.back().logprob);
  }
}

TEST_F(ModelExecutorTest, PromptTopTokensRankEachPromptPositionWhateverTheChunks) {
  std::vector<EngineRequest> reqs = requests();
  for (EngineRequest& r : reqs) {
    r.prompt_logprobs = true;
    r.use_prefix_cache = false;
    r.prompt_top_n_tokens = 3;
  }
  const std::vector<GenerationResult> whole = generate_together(reqs, 4096);
  const std::vector<GenerationResult> chunked = generate_together(reqs, 4);
  for (size_t i = 0; i < reqs.size(); ++i) {
    SCOPED_TRACE(i);
    const SampleResult& first = whole[i].tokens[0];
    ASSERT_EQ(first.prompt_top_tokens.size(), reqs[i].prompt_ids.size() - 1);
    ASSERT_EQ(chunked[i].tokens[0].prompt_top_tokens.size(), first.prompt_top_tokens.size());
    for (size_t p = 0; p < first.prompt_top_tokens.size(); ++p) {
      const std::vector<TokenLogprob>& top = first.prompt_top_tokens[p];
      ASSERT_GE(top.size(), 3u);
      for (size_t k = 1; k < top.size(); ++k) EXPECT_GE(top[k - 1].logprob, top[k].logprob);
      // The prompt token is listed with its own logprob, or scores below every listed one.
      const int32_t id = reqs[i].prompt_ids[p + 1];
      auto it = std::find_if(top.begin(), top.end(),
                             [&](const TokenLogprob& alt) { return alt.id == id; });
      if (it != top.end()) {
        EXPECT_NEAR(it->logprob, first.prompt_logprobs[p], 1e-5);
      } else {
        EXPECT_LT(first.prompt_logprobs[p], top.back().logprob);
      }
      const std::vector<TokenLogprob>& other = chunked[i].tokens[0].prompt_top_tokens[p];
      ASSERT_EQ(other.size(), top.size());
      for (size_t k = 0; k < top.size(); ++k) {
        EXPECT_EQ(other[k].id, top[k].id);
        EXPECT_NEAR(other[k].logprob, top[k].logprob, 1e-4);
      }
    }
  }
  // Position 0's alternatives are those a one-token prompt's first (greedy, unprocessed) token
  // reports; without prompt_top_n_tokens there are none.
  EngineRequest one;
  one.prompt_ids = {reqs[0].prompt_ids[0]};
  one.max_new_tokens = 1;
  one.sampling.top_n_tokens = 3;
  const std::vector<TokenLogprob> expected = generate_alone(one).tokens[0].top_tokens;
  const std::vector<TokenLogprob>& top0 = whole[0].tokens[0].prompt_top_tokens[0];
  ASSERT_EQ(top0.size(), expected.size());
  for (size_t k = 0; k < top0.size(); ++k) {
    EXPECT_EQ(top0[k].id, expected[k].id);
    EXPECT_NEAR(top0[k].logprob, expected[k].logprob, 1e-4);
  }
  reqs[0].prompt_top_n_tokens = 0;
  EXPECT_TRUE(generate_alone(reqs[0]).tokens[0].prompt_top_tokens.empty());
}

// Plays the Scheduler by hand: each step every unfinished sequence computes up to `chunk` of its
// remaining tokens, blocks come from a shuffled free list, and at step `preempt_step` sequence 1
// loses its blocks and later recomputes everything it had from position 0.
std::vector<GenerationResult> run_by_hand(ModelExecutor& executor, LlamaModel& model,
                                          const std::vector<EngineRequest>& reqs, int64_t chunk,
                                          int64_t preempt_step) {
  const int64_t block_size = executor.kv_pool().block_size();
  std::vector<int32_t> free_blocks(static_cast<size_t>(executor.kv_pool().num_blocks() - 1));
  std::iota(free_blocks.begin(), free_blocks.end(), 1);
  std::shuffle(free_blocks.begin(), free_blocks.end(), std::mt19937(3));
  std::vector<std::unique_ptr<Sequence>> seqs;
  for (size_t i = 0; i < reqs.size(); ++i)
    seqs.push_back(std::make_unique<Sequence>(static_cast<int64_t>(i) + 100, reqs[i], nullptr));
  std::vector<GenerationResult> out(reqs.size());
  const std::vector<int32_t>& eos = model.config().eos_token_ids;
  auto free_all = [&](Sequence& seq) {
    free_blocks.insert(free_blocks.end(), seq.block_table.begin(), seq.block_table.end());
    seq.block_table.clear();
  };
  for (int64_t step = 0;; ++step) {
    ScheduledBatch batch;
    for (size_t i = 0; i < seqs.size(); ++i) {
      Sequence& seq = *seqs[i];
      if (seq.status == SequenceStatus::kFinished) continue;
      if (step == preempt_step && i == 1) {  // preempted: waits this step, recomputes later
        free_all(seq);
        seq.num_computed_tokens = 0;
        continue;
      }
      const int64_t n = std::min(seq.num_tokens() - seq.num_computed_tokens, chunk);
      const int64_t end = seq.num_computed_tokens + n;
      while (static_cast<int64_t>(seq.block_table.size()) * block_size < end) {
        seq.block_table.push_back(free_blocks.back());
        free_blocks.pop_back();
      }
      batch.sequences.push_back(ScheduledSequence{.sequence = &seq,
                                                  .seq_id = seq.id,
                                                  .first_position = seq.num_computed_tokens,
                                                  .num_tokens = n,
                                                  .samples = end == seq.num_tokens(),
                                                  .block_table = seq.block_table});
    }
    if (batch.empty()) break;
    Result<std::vector<SampleResult>> samples = executor.execute(batch);
    EXPECT_TRUE(samples.ok());
    size_t k = 0;
    for (const ScheduledSequence& entry : batch.sequences) {
      auto& seq = const_cast<Sequence&>(*entry.sequence);
      seq.num_computed_tokens += entry.num_tokens;
      if (!entry.samples) continue;
      const SampleResult& token = (*samples)[k++];
      GenerationResult& result = out[static_cast<size_t>(seq.id - 100)];
      result.tokens.push_back(token);
      seq.token_ids.push_back(token.id);
      const bool length = seq.num_generated_tokens() >= seq.request.max_new_tokens;
      const bool is_eos =
          !seq.request.ignore_eos && std::find(eos.begin(), eos.end(), token.id) != eos.end();
      if (length || is_eos) {
        result.finish_reason = length ? FinishReason::kLength : FinishReason::kEosToken;
        seq.status = SequenceStatus::kFinished;
        free_all(seq);
        executor.release(seq.id);
      }
    }
  }
  return out;
}

TEST_F(ModelExecutorTest, HandBuiltBatchesMatchEachRunAlone) {
  const std::vector<EngineRequest> reqs = requests();
  EngineConfig config;
  config.block_size = 4;
  config.num_blocks = 40;
  // (chunk, preempt_step): whole prompts; chunks of 3; chunks and a preemption mid-decode.
  for (const auto& [chunk, preempt_step] :
       std::vector<std::pair<int64_t, int64_t>>{{1000, -1}, {3, -1}, {3, 7}, {1000, 2}}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk) + " preempt " + std::to_string(preempt_step));
    ModelExecutor executor(*model_, *pool_, config);
    const std::vector<GenerationResult> together =
        run_by_hand(executor, *model_, reqs, chunk, preempt_step);
    EXPECT_EQ(executor.num_sequences(), 0);
    for (size_t i = 0; i < reqs.size(); ++i) {
      SCOPED_TRACE(i);
      const GenerationResult alone = generate_alone(reqs[i]);
      EXPECT_EQ(ids_of(together[i]), ids_of(alone));
      EXPECT_EQ(together[i].finish_reason, alone.finish_reason);
      ASSERT_EQ(together[i].tokens.size(), alone.tokens.size());
      for (size_t t = 0; t < alone.tokens.size(); ++t)
        EXPECT_NEAR(together[i].tokens[t].logprob, alone.tokens[t].logprob, 1e-4);
    }
  }
}

// A prefix-cache hit (first_position > 0 over another sequence's full blocks) gives the same
// first token as computing the prompt alone.
TEST_F(ModelExecutorTest, PrefixHitsReuseCachedKv) {
  EngineConfig config;
  config.block_size = 4;
  config.num_blocks = 16;
  ModelExecutor executor(*model_, *pool_, config);
  EngineRequest a_req;
  a_req.prompt_ids = {1, 17, 250, 3, 99, 5, 6, 7, 8, 300};  // 10 tokens: blocks 5, 9, 2
  a_req.max_new_tokens = 4;
  Sequence a(1, a_req, nullptr);
  ScheduledBatch first;
  first.sequences.push_back({&a, 1, 0, 10, true, {5, 9, 2}});
  ASSERT_TRUE(executor.execute(first).ok());

  // b shares a's first 8 positions (two full blocks) and adds its own tokens.
  EngineRequest b_req = a_req;
  b_req.prompt_ids = {1, 17, 250, 3, 99, 5, 6, 7, 40, 41, 42};
  Sequence b(2, b_req, nullptr);
  ScheduledBatch second;
  second.sequences.push_back({&b, 2, 8, 3, true, {5, 9, 7}});
  Result<std::vector<SampleResult>> got = executor.execute(second);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  const GenerationResult b_alone = generate_alone(b_req);
  EXPECT_EQ((*got)[0].id, b_alone.tokens[0].id);
  EXPECT_NEAR((*got)[0].logprob, b_alone.tokens[0].logprob, 1e-4);
  EXPECT_EQ(executor.num_sequences(), 2);
  for (int64_t id : {1, 2, 99}) executor.release(id);  // 99 was never seen
  EXPECT_EQ(executor.num_sequences(), 0);
}

TEST_F(ModelExecutorTest, CheckRequestRejectsIdsOutsideTheVocabularyAndOverlongRequests) {
  ModelExecutor executor(*model_, *pool_, EngineConfig{});
  EngineRequest r;
  r.prompt_ids = {1, 384};
  r.max_new_tokens = 4;
  Status bad_id = executor.check_request(r);
  ASSERT_FALSE(bad_id.ok());
  EXPECT_EQ(bad_id.error().message, "prompt token id 384 is outside the vocabulary");
  r.prompt_ids = {1, 383};
  EXPECT_TRUE(executor.check_request(r).ok());
  r.max_new_tokens = 255;  // 2 + 255 > 256 positions
  Status too_long = executor.check_request(r);
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.error().message,
            "prompt (2 tokens) + max_new_tokens (255) exceeds the model's context of 256 tokens");
}

TEST_F(ModelExecutorTest, WarmUpRunsAForwardAndRejectsAnEmptyPrompt) {
  EXPECT_TRUE(warm_up(*model_, *pool_, 64).ok());
  EXPECT_TRUE(warm_up(*model_, *pool_, 100000).ok());  // clamped to the 256-token context
  Status empty = warm_up(*model_, *pool_, 0);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().message, "the warm-up needs at least one token");
}

// The CUDA runner warms up through the executor it then serves with: the warm-up borrows it and
// hands its sequence back.
TEST_F(ModelExecutorTest, WarmUpThroughAKeptExecutorReleasesItsSequence) {
  EngineConfig config;
  config.block_size = 4;
  config.max_batch_total_tokens = 128;
  ModelExecutor executor(*model_, *pool_, config);
  executor.set_reject_non_finite_logits(true);
  EXPECT_TRUE(warm_up(executor, model_->config(), 64, 4).ok());
  EXPECT_EQ(executor.num_sequences(), 0);
  EXPECT_FALSE(warm_up(executor, model_->config(), 0, 4).ok());
}

// Overwrites the bytes of `tensor` in a .safetensors file with 0xff (NaN in every float dtype).
void poison_tensor(const std::filesystem::path& file, const std::string& tensor) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  uint64_t header_len = 0;
  f.read(reinterpret_cast<char*>(&header_len), sizeof header_len);
  std::string header(header_len, '\0');
  f.read(header.data(), static_cast<std::streamsize>(header_len));
  const size_t entry = header.find("\"" + tensor + "\"");
  ASSERT_NE(entry, std::string::npos);
  const size_t offsets = header.find("\"data_offsets\":[", entry) + 16;
  const uint64_t begin = std::stoull(header.substr(offsets));
  const uint64_t end = std::stoull(header.substr(header.find(',', offsets) + 1));
  f.seekp(static_cast<std::streamoff>(8 + header_len + begin));
  const std::string nan_bytes(end - begin, '\xff');
  f.write(nan_bytes.data(), static_cast<std::streamsize>(nan_bytes.size()));
  ASSERT_TRUE(f.good());
}

// A model whose final norm is NaN: every logit is NaN, which serving would sample as -inf but
// the warm-up must refuse.
TEST_F(ModelExecutorTest, WarmUpRejectsAModelWithNonFiniteLogits) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / "nan_final_norm";
  fs::remove_all(dir);
  fs::copy(kModelPath, dir, fs::copy_options::recursive);
  poison_tensor(dir / "model.safetensors", "model.norm.weight");
  auto broken = LlamaModel::load(dir.string());
  ASSERT_TRUE(broken.ok()) << broken.error().message;
  Status s = warm_up(**broken, *pool_, 16);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message,
            "the warm-up failed: the forward of 16 tokens produced a non-finite logit; the "
            "model's weights are broken");
  broken->reset();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace lm

namespace lm {
namespace {

// Issue 4's end-to-end check on a real model: requests that share a prompt prefix, arrive at
// different times and outgrow a tiny KV pool (so the scheduler preempts and recomputes) still
// produce exactly the greedy tokens each produces alone.
TEST_F(ModelExecutorTest, TinyKvPoolWithPreemptionAndSharedPrefixesMatchesEachRunAlone) {
  std::vector<EngineRequest> reqs(8);
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].prompt_ids = {1, 17, 250, 3, 99, 100, 101, 102};  // two full blocks shared by all
    for (size_t j = 0; j <= i % 4; ++j)
      reqs[i].prompt_ids.push_back(static_cast<int32_t>(20 + 7 * i + j));
    reqs[i].max_new_tokens = static_cast<int64_t>(12 + 2 * i);
    reqs[i].ignore_eos = true;
  }
  std::vector<GenerationResult> alone;
  for (const EngineRequest& r : reqs) alone.push_back(generate_alone(r));

  EngineConfig config;
  config.block_size = 4;
  config.num_blocks = 12;  // 11 usable: the longest request needs 10, two cannot both grow
  config.max_batch_prefill_tokens = 16;
  config.max_batch_total_tokens = 1024;
  config.eos_token_ids = model_->config().eos_token_ids;
  auto executor = std::make_unique<ModelExecutor>(*model_, *pool_, config);
  ModelExecutor* executor_ptr = executor.get();
  Engine engine(config, std::move(executor));
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  for (size_t i = 0; i < reqs.size(); ++i) {
    sinks.push_back(std::make_shared<CollectingSink>());
    ASSERT_TRUE(engine.submit(reqs[i], sinks[i]).ok());
    if (i >= 5) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // late arrivals
  }
  for (size_t i = 0; i < reqs.size(); ++i) {
    SCOPED_TRACE(i);
    const GenerationResult together = sinks[i]->wait();
    EXPECT_EQ(ids_of(together), ids_of(alone[i]));
  }
  engine.drain();
  const EngineStats stats = engine.stats();
  EXPECT_GT(stats.num_preemptions, 0);
  EXPECT_GT(stats.prefix_cache_hit_tokens, 0);
  EXPECT_EQ(stats.num_running, 0);
  EXPECT_EQ(executor_ptr->num_sequences(), 0);
  std::cout << "[ measured ] preemptions " << stats.num_preemptions << ", prefix-cache hit tokens "
            << stats.prefix_cache_hit_tokens << "/" << stats.prefix_cache_query_tokens << "\n";
}

// Constrained sequences through preemption and recompute, with and without speculation: each
// keeps its matcher (its generated tokens are kept), so together they get exactly the tokens
// they get alone, and every text matches the grammar. The tiny model's 384 ids get a made-up
// vocabulary: 3..28 spell a..z, the others "w<id>"; 0-2 are special (2 the EOS).
TEST_F(ModelExecutorTest, ConstrainedSequencesThroughPreemptionMatchEachRunAlone) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  for (int32_t id = 3; id < 384; ++id)
    tokens.push_back(id < 29 ? std::string(1, static_cast<char>('a' + id - 3))
                             : "w" + std::to_string(id));
  testing_tok::Json j = testing_tok::bpe_json(tokens, {});
  j["added_tokens"] = {testing_tok::added(0, "<unk>", true), testing_tok::added(1, "<s>", true),
                       testing_tok::added(2, "</s>", true)};
  std::unique_ptr<Tokenizer> tokenizer = testing_tok::load(j);
  ASSERT_NE(tokenizer, nullptr);
  GrammarVocab vocab(*tokenizer, static_cast<int32_t>(model_->config().vocab_size),
                     model_->config().eos_token_ids);
  GrammarCompiler compiler(vocab);
  const std::string pattern = "(ab|cd|w1[0-9][0-9])+";
  auto grammar = compiler.compile({GrammarKind::kRegex, pattern});
  ASSERT_TRUE(grammar.ok()) << grammar.error().message;

  std::vector<EngineRequest> reqs(8);
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].prompt_ids = {1, 17, 250, 3, 99, 100, 101, 102};
    for (size_t j2 = 0; j2 <= i % 4; ++j2)
      reqs[i].prompt_ids.push_back(static_cast<int32_t>(20 + 7 * i + j2));
    reqs[i].max_new_tokens = static_cast<int64_t>(12 + 2 * i);
    reqs[i].grammar = *grammar;
    if (i % 2 == 1) {
      reqs[i].sampling.do_sample = true;
      reqs[i].sampling.seed = 100 + i;
    }
  }
  std::vector<GenerationResult> alone;
  for (const EngineRequest& r : reqs) alone.push_back(generate_alone(r));

  // Plainly, then speculating: n-gram proposals, and a draft (the model itself, unconstrained:
  // its proposals are often tokens the grammar refuses, which end the verified run there).
  for (const std::string mode : {"plain", "n-gram", "draft"}) {
    SCOPED_TRACE(mode);
    EngineConfig config;
    config.block_size = 4;
    config.num_blocks = 12;
    config.max_batch_prefill_tokens = 16;
    config.max_batch_total_tokens = 1024;
    config.eos_token_ids = model_->config().eos_token_ids;
    config.speculate = mode == "plain" ? 0 : 3;
    std::unique_ptr<Proposer> proposer;
    if (mode == "draft") {
      proposer = std::make_unique<DraftProposer>(*model_, *pool_, 64, 4, DType::kF32,
                                                 model_->config().vocab_size);
    }
    auto executor = std::make_unique<ModelExecutor>(*model_, *pool_, config);
    ModelExecutor* executor_ptr = executor.get();
    Engine engine(config, std::move(executor), {}, std::move(proposer));
    std::vector<std::shared_ptr<CollectingSink>> sinks;
    for (size_t i = 0; i < reqs.size(); ++i) {
      sinks.push_back(std::make_shared<CollectingSink>());
      ASSERT_TRUE(engine.submit(reqs[i], sinks[i]).ok());
    }
    int num_eos = 0;
    for (size_t i = 0; i < reqs.size(); ++i) {
      SCOPED_TRACE(i);
      const GenerationResult together = sinks[i]->wait();
      EXPECT_EQ(ids_of(together), ids_of(alone[i]));
      std::string text;
      for (int32_t id : ids_of(together)) {
        if (id != 2) text += tokenizer->token_text(id);
      }
      if (together.finish_reason == FinishReason::kEosToken) {
        ++num_eos;
        EXPECT_TRUE(std::regex_match(text, std::regex(pattern))) << text;
      } else {
        EXPECT_TRUE(std::regex_match(text, std::regex("(ab|cd|w1[0-9][0-9])*(a|c|w1?[0-9]?)?")))
            << text;  // cut by max_new_tokens: a prefix of a match
      }
    }
    engine.drain();
    EXPECT_GT(engine.stats().num_preemptions, 0);
    EXPECT_EQ(executor_ptr->num_sequences(), 0);
    if (mode != "plain") {
      EXPECT_GT(engine.stats().num_proposed_tokens, 0);
    }
    std::cout << "[ measured ] " << mode << ": " << num_eos << " of 8 ended with EOS, preemptions "
              << engine.stats().num_preemptions << ", accepted "
              << engine.stats().num_accepted_tokens << " of " << engine.stats().num_proposed_tokens
              << " proposed\n";
  }
}

}  // namespace
}  // namespace lm
