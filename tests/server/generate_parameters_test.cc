#include "server/admission/generate_parameters.h"

#include <gtest/gtest.h>

namespace lm {
namespace {

TEST(GenerateParametersDebugText, ReadsLikeTgisSpanField) {
  EXPECT_EQ(debug_text(GenerateParameters{}),
            "GenerateParameters { adapter_id: None, best_of: None, temperature: None, "
            "repetition_penalty: None, frequency_penalty: None, top_k: None, top_p: None, "
            "typical_p: None, do_sample: false, max_new_tokens: None, return_full_text: None, "
            "stop: [], truncate: None, watermark: false, details: false, "
            "decoder_input_details: false, seed: None, top_n_tokens: None, grammar: None }");
  GenerateParameters p;
  p.adapter_id = "a\"b";
  p.best_of = 2;
  p.temperature = 0.5f;
  p.repetition_penalty = 1.0f;
  p.top_k = -1;
  p.do_sample = true;
  p.max_new_tokens = 20;
  p.stop = {"\n", "end"};
  p.seed = 42;
  p.grammar = GrammarParameter{"regex", "\"[a-z]+\""};
  const std::string text = debug_text(p);
  for (const char* part :
       {"adapter_id: Some(\"a\\\"b\")", "best_of: Some(2)", "temperature: Some(0.5)",
        "repetition_penalty: Some(1.0)", "top_k: Some(-1)", "do_sample: true",
        "max_new_tokens: Some(20)", "stop: [\"\\n\", \"end\"]", "seed: Some(42)",
        "grammar: Some(Regex(\"[a-z]+\")) }"}) {
    EXPECT_NE(text.find(part), std::string::npos) << part << "\n" << text;
  }
}

}  // namespace
}  // namespace lm
