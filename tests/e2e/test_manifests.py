"""TGI deployment manifests start here: every harmless TGI flag/variable is accepted (and said to
have no effect where it has none), --dtype / --rope-* / --tokenizer-config-path are honoured, the
settings we do not build are refused by name, and --dry-run prints the memory plan."""

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from conftest import LAUNCHER, MODEL, ROOT, gen_body, launch_server

TEST_MODELS = LAUNCHER.parents[2] / "test-models"
SMOLLM2_F32 = TEST_MODELS / "smollm2-f32"
FIXTURES = ROOT / "tests/fixtures/models"


def run_launcher(args=(), env=None, timeout=120) -> subprocess.CompletedProcess:
    """The launcher run to its exit (refusals, --dry-run, -V)."""
    full_env = {k: v for k, v in os.environ.items() if k not in ("HOSTNAME", "PORT", "MODEL_ID")}
    full_env.update(env or {})
    return subprocess.run([str(LAUNCHER), *args], env=full_env, cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip


def greedy_ids(server, prompt: str, n: int) -> list[int]:
    r = server.post("/generate", gen_body(prompt, max_new_tokens=n, details=True))
    assert r.status_code == 200, r.text
    return [t["id"] for t in r.json()["details"]["tokens"]]


# ---- a TGI manifest's environment ----------------------------------------------------------------

MANIFEST_ENV = {
    "DTYPE": "bfloat16",
    "OTLP_ENDPOINT": "http://otel-collector:4317",
    "OTLP_SERVICE_NAME": "tgi-smollm",
    "CUDA_GRAPHS": "1,2,4,8,16",
    "CUDA_MEMORY_FRACTION": "0.9",
    "DISABLE_CUSTOM_KERNELS": "true",
    "ROPE_SCALING": "dynamic",
    "ROPE_FACTOR": "1.0",
    "USE_FLASH_ATTENTION": "true",
    "LOG_LEVEL": "info,text_generation_router=info",
    "TRUST_REMOTE_CODE": "true",
    "SHARDED": "false",
    "NUM_SHARD": "1",
    "MAX_CONCURRENT_REQUESTS": "64",
    "MAX_BATCH_PREFILL_TOKENS": "512",
    "PROMETHEUS_PORT": "9001",
    "USAGE_STATS": "off",
    "DISABLE_GRAMMAR_SUPPORT": "false",
}


def test_tgi_manifest_environment_starts_and_serves():
    with launch_server(env=MANIFEST_ENV) as s:
        r = s.post("/generate", gen_body("The capital of France is", max_new_tokens=4))
        assert r.status_code == 200, r.text
        assert r.json()["generated_text"]
        assert s.get("/info").json()["max_concurrent_requests"] == 64
        logs = s.stdout() + s.stderr()
    for note in ("--cuda-graphs 1,2,4,8,16 has no effect on the CPU backend",
                 "--cuda-memory-fraction has no effect on the CPU backend",
                 "--disable-custom-kernels has no effect on the CPU backend",
                 "--otlp-endpoint http://otel-collector:4317: port 4317 is OTLP/gRPC's, but traces "
                 "are exported with OTLP/HTTP (JSON), which a collector receives on port 4318",
                 "USE_FLASH_ATTENTION=true has no effect on the CPU backend",
                 "--trust-remote-code has no effect",
                 # The default model is all block-quantized: --dtype says what it does to it.
                 "--dtype bfloat16: 0 float matrices converted",
                 "block-quantized matrices keep their format"):  # fmt: skip
        assert note in logs, (note, logs)
    assert logs.count("--cuda-graphs") == 1, "each note is logged once"


def test_log_level_from_the_environment():
    with launch_server(env={"LOG_LEVEL": "warn", "CUDA_GRAPHS": "0"}) as s:
        assert s.post("/generate", gen_body("Hi", max_new_tokens=1)).status_code == 200
        logs = s.stdout() + s.stderr()
    assert "Warming up model" not in logs  # info is below warn
    assert "--cuda-graphs 0 has no effect" in logs
    with launch_server(env={"RUST_LOG": "debug"}) as s:
        assert s.post("/generate", gen_body("Hi", max_new_tokens=1)).status_code == 200
        assert "Warming up model" in s.stdout() + s.stderr()


@pytest.mark.parametrize(("env", "message"), [
    ({"QUANTIZE": "exl2"}, "--quantize exl2 is not supported yet"),
    ({"QUANTIZE": "gptq"}, "--quantize gptq: "),  # the default model is a GGUF file
    ({"NUM_SHARD": "2"}, "sharding (--sharded/--num-shard > 1) is not supported yet"),
    ({"SHARDED": "true"}, "issue 25"),
    ({"LORA_ADAPTERS": "org/adapter"}, "--lora-adapters is not supported yet"),
    ({"KV_CACHE_DTYPE": "fp4"}, "expected fp8_e4m3fn, fp8_e5m2, fp8, fp16, bf16 or fp32"),
    ({"DTYPE": "float8"}, "`dtype` must be one of float16, bfloat16, float32"),
    ({"ROPE_SCALING": "yarn"}, "`rope_scaling` must be one of linear, dynamic"),
])  # fmt: skip
def test_settings_that_change_results_are_refused_by_name(env, message):
    r = run_launcher(["--model-id", MODEL, "--port", "1"], env=env)
    assert r.returncode == 1
    assert message in r.stdout + r.stderr


def test_version():
    r = run_launcher(["-V"])
    assert r.returncode == 0
    assert r.stdout.startswith("text-generation-launcher 3.")


# ---- --dry-run -----------------------------------------------------------------------------------


def test_dry_run_prints_the_memory_plan_and_serves_nothing():
    r = run_launcher(["--model-id", MODEL, "--dry-run", "--port", "1"])
    assert r.returncode == 0, r.stderr
    for line in ("Weights in memory:", "KV cache dtype: fp16, 23040 bytes per token",
                 "max_batch_total_tokens: ",
                 "max_total_tokens: 8192", "max_input_tokens: 8191", "max_batch_prefill_tokens: 4096",
                 "KV budget from ", "Step latency target: 300 ms"):  # fmt: skip
        assert line in r.stdout, (line, r.stdout)
    assert "Warming up model" not in r.stdout + r.stderr

    r = run_launcher(env={"MODEL_ID": MODEL, "DRY_RUN": "true", "JSON_OUTPUT": "true"})
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.strip().splitlines()
    plan = json.loads(lines[-1])  # log lines (JSON too) come first, the plan last
    assert all("fields" in json.loads(line) for line in lines[:-1])
    mem = plan["memory"]
    # SmolLM2-135M: 30 layers x 3 KV heads x 64 dims x (K + V) x fp16 (the default cache for
    # block-quantized weights with int8 activations).
    assert plan["kv_cache_dtype"] == "fp16"
    assert mem["kv_bytes_per_token"] == 30 * 3 * 64 * 2 * 2
    assert 80e6 < mem["weights_bytes"] < 110e6  # the Q4_1 file's matrices, held as stored
    assert plan["weights"]["stored_dtypes"] == "Q4_1, Q8_0"
    left = mem["available_bytes"] - mem["weights_bytes"] - mem["margin_bytes"]
    assert mem["kv_budget_bytes"] == int(left * mem["kv_cache_memory_fraction"])
    assert plan["max_batch_total_tokens"] == mem["kv_budget_bytes"] // mem["kv_bytes_per_token"]
    assert plan["max_batch_total_tokens_inferred"] is True
    assert plan["max_total_tokens"] == 8192 and plan["max_input_tokens"] == 8191
    assert mem["source"].startswith(("MemAvailable", "cgroup v"))
    assert plan["num_threads"] >= 1 and plan["device"] == "cpu"
    assert plan["max_step_latency_ms"] == 300
    r = run_launcher(["--model-id", MODEL, "--dry-run", "--max-step-latency-ms", "0"])
    assert "Step latency target: off" in r.stdout, r.stdout


@pytest.mark.parametrize(("args", "env", "dtype", "element_bytes"), [
    ([], {"KV_CACHE_DTYPE": "fp8_e4m3fn"}, "fp8_e4m3fn", 1),  # TGI's names
    ([], {"KV_CACHE_DTYPE": "fp8_e5m2"}, "fp8_e5m2", 1),
    (["--kv-cache-dtype", "fp8"], {}, "fp8_e4m3fn", 1),  # vLLM's
    (["--kv-cache-dtype", "bf16"], {}, "bf16", 2),
    (["--kv-cache-dtype", "fp32"], {}, "fp32", 4),
    ([], {"INT8_ACTIVATIONS": "false"}, "fp32", 4),  # the transformers-exact mode keeps fp32
])  # fmt: skip
def test_kv_cache_dtype_sets_the_bytes_per_token_and_the_token_budget(args, env, dtype,
                                                                      element_bytes):
    r = run_launcher(["--model-id", MODEL, "--dry-run", "--json-output", *args], env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    plan = json.loads(r.stdout.strip().splitlines()[-1])
    mem = plan["memory"]
    assert plan["kv_cache_dtype"] == dtype
    assert mem["kv_bytes_per_token"] == 30 * 3 * 64 * 2 * element_bytes
    # MAX_BATCH_TOTAL_TOKENS inferred from free memory: a smaller element, more tokens.
    assert plan["max_batch_total_tokens"] == mem["kv_budget_bytes"] // mem["kv_bytes_per_token"]


def test_a_float_checkpoint_keeps_an_fp32_cache_by_default():
    r = run_launcher(["--model-id", str(SMOLLM2_F32), "--dry-run", "--json-output"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["kv_cache_dtype"] == "fp32"


def test_kquants_at_load_plan_serve_and_fall_back_as_llama_cpp():
    """QUANTIZE=q4_k on the default model's float copy: the down projections (rows of 1536, whole
    256-value super-blocks) in Q4_K, the Linears with rows of 576 in llama.cpp's fallback Q5_0
    (tests/model/load_options_test.cc checks the blocks); the plan counts it and the model serves."""
    def weights_bytes(quantize):
        r = run_launcher(["--model-id", str(SMOLLM2_F32), "--dry-run", "--json-output",
                          "--quantize", quantize])  # fmt: skip
        assert r.returncode == 0, r.stdout + r.stderr
        return json.loads(r.stdout.strip().splitlines()[-1])["memory"]["weights_bytes"]

    # 30 down projections of 576 x 1536: Q5_0's 22 bytes per 32 values against Q4_K's 144 per 256.
    assert weights_bytes("q5_0") - weights_bytes("q4_k") == 30 * 576 * 1536 * (22 / 32 - 144 / 256)
    with launch_server(["--model-id", str(SMOLLM2_F32)], env={"QUANTIZE": "q4_k"},
                       use_flags_for_port=False) as s:  # fmt: skip
        r = s.post("/generate", gen_body("The capital of France is", max_new_tokens=8))
        assert r.status_code == 200, r.text
        assert r.json()["generated_text"].strip()
        log = s.stdout() + s.stderr()
        assert "--quantize q4_k: quantized 210 float weight matrices" in log, log
        assert "(matrices now F32, Q4_K, Q5_0)" in log, log


@pytest.mark.parametrize("quant_type", ["nf4", "fp4"])
def test_bitsandbytes_4bit_at_load_serves_what_transformers_computes(quant_type):
    """TGI's QUANTIZE=bitsandbytes-nf4 / -fp4 on a float folder: NF4/FP4 blocks of 64 (4.5 bits a
    weight, counted by the plan), an fp32 KV cache (no int8 path: transformers' numerics), and the
    greedy tokens of transformers over bitsandbytes' own round trip of the same weights
    (tests/fixtures/models/smollm2-bnb-*.json)."""
    env = {"QUANTIZE": f"bitsandbytes-{quant_type}"}
    r = run_launcher(["--model-id", str(SMOLLM2_F32), "--dry-run", "--json-output"], env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    plan = json.loads(r.stdout.strip().splitlines()[-1])
    assert plan["kv_cache_dtype"] == "fp32"
    r = run_launcher(["--model-id", str(SMOLLM2_F32), "--dry-run", "--json-output",
                      "--quantize", "q4_0"])  # fmt: skip
    q4_0 = json.loads(r.stdout.strip().splitlines()[-1])["memory"]["weights_bytes"]
    # 30 layers x 7 Linears: 36 bytes per 64 values against Q4_0's 18 per 32, the same 4.5 bits.
    assert plan["memory"]["weights_bytes"] == q4_0
    cases = json.loads((FIXTURES / f"smollm2-bnb-{quant_type}.json").read_text())["cases"]
    with launch_server(["--model-id", str(SMOLLM2_F32)], env=env,
                       use_flags_for_port=False) as s:  # fmt: skip
        for case in cases[:3]:
            want = until_eos(case["greedy_ids"])
            assert greedy_ids(s, case["prompt"], len(want)) == want, case["prompt"]
        log = s.stdout() + s.stderr()
        assert f"(matrices now F32, {quant_type.upper()})" in log, log


def test_eetq_at_load_serves_what_transformers_computes():
    """TGI's QUANTIZE=eetq on a float folder: EETQ's per-channel int8 values and fp16 scales, held
    exactly as Q8_0 blocks (the plan counts q8_0's bytes), an fp16 KV cache (the int8 path, as for
    q8_0), and with fp32 activations the greedy tokens of transformers over EETQ's dequantized
    weights (tests/fixtures/models/smollm2-eetq.json)."""
    def plan(quantize):
        r = run_launcher(["--model-id", str(SMOLLM2_F32), "--dry-run", "--json-output",
                          "--quantize", quantize])  # fmt: skip
        assert r.returncode == 0, r.stdout + r.stderr
        return json.loads(r.stdout.strip().splitlines()[-1])

    eetq = plan("eetq")
    assert eetq["memory"]["weights_bytes"] == plan("q8_0")["memory"]["weights_bytes"]
    assert eetq["kv_cache_dtype"] == "fp16"
    cases = json.loads((FIXTURES / "smollm2-eetq.json").read_text())["cases"]
    with launch_server(["--model-id", str(SMOLLM2_F32), "--int8-activations", "false"],
                       env={"QUANTIZE": "eetq"}, use_flags_for_port=False) as s:  # fmt: skip
        for case in cases[:3]:
            want = until_eos(case["greedy_ids"])
            assert greedy_ids(s, case["prompt"], len(want)) == want, case["prompt"]
        log = s.stdout() + s.stderr()
        assert "--quantize eetq: quantized 210 float weight matrices" in log, log
        assert "(matrices now F32, Q8_0)" in log, log


def test_llm_int8_at_load_serves_what_bitsandbytes_computes():
    """TGI's QUANTIZE=bitsandbytes on a float folder: LLM.int8's int8 rows (Q8_0 blocks of scale 1
    and an fp32 absmax a row), activations quantized per token with their outliers in float, an
    fp32 KV cache (transformers' numerics, as for bitsandbytes' 4-bit types), and the greedy tokens
    of transformers with Linear8bitLt (tests/fixtures/models/smollm2-bnb-int8.json) for the
    one-token prompt: longer ones meet LLM.int8's amplified rounding (tests/model/
    load_options_test.cc), which no two implementations share."""
    r = run_launcher(["--model-id", str(SMOLLM2_F32), "--dry-run", "--json-output",
                      "--quantize", "bitsandbytes"])  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["kv_cache_dtype"] == "fp32"
    cases = json.loads((FIXTURES / "smollm2-bnb-int8.json").read_text())["cases"]
    one_token = [c for c in cases if len(c["prompt_ids"]) == 1]
    assert len(one_token) == 1
    with launch_server(["--model-id", str(SMOLLM2_F32)], env={"QUANTIZE": "bitsandbytes"},
                       use_flags_for_port=False) as s:  # fmt: skip
        for case in one_token:
            want = until_eos(case["greedy_ids"])
            assert greedy_ids(s, case["prompt"], len(want)) == want, case["prompt"]
        log = s.stdout() + s.stderr()
        assert "--quantize bitsandbytes: quantized 210 float weight matrices" in log, log
        assert "(matrices now F32, Q8_0)" in log, log
        # the int8 GEMM's layout where this CPU has it (AVX2 and up), with LLM.int8's own
        # activation quantization (tests/model/llm_int8_linear_test.cc)
        assert "Interleaved 210 weight matrices for the int8 GEMM" in log, log


def test_an_fp8_cache_serves_and_says_so():
    with launch_server(env={"KV_CACHE_DTYPE": "fp8_e4m3fn"}) as s:
        r = s.post("/generate", gen_body("The capital of France is", max_new_tokens=8))
        assert r.status_code == 200, r.text
        assert r.json()["generated_text"].strip()
        assert ", fp8_e4m3fn, prefix caching" in s.stdout() + s.stderr()


def test_cpu_isa_caps_the_kernels_and_says_so():
    r = run_launcher(["--model-id", MODEL, "--dry-run", "--json-output", "--cpu-isa", "avx2"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["cpu_isa"] == "avx2"
    assert "CPU kernels: avx2 (capped by --cpu-isa; this CPU runs " in r.stdout
    r = run_launcher(["--model-id", MODEL, "--dry-run", "--json-output"])
    assert r.returncode == 0, r.stdout + r.stderr
    plan = json.loads(r.stdout.strip().splitlines()[-1])
    assert plan["cpu_isa"] in ("scalar", "avx2", "avx-vnni", "avx512", "avx512-vnni", "avx512-bf16")
    assert f"CPU kernels: {plan['cpu_isa']} (the best this CPU runs)" in r.stdout
    r = run_launcher(["--model-id", MODEL, "--dry-run"], env={"CPU_ISA": "sse"})
    assert r.returncode == 1
    assert "--cpu-isa must be auto, scalar, avx2, avx-vnni, avx512, avx512-vnni or avx512-bf16, not sse" in r.stdout + r.stderr


def test_generate_takes_cpu_isa():
    r = run_launcher(["generate", "--model-id", MODEL, "--prompt", "Hello", "--max-new-tokens", "2",
                      "--num-threads", "2", "--cpu-isa", "avx2"])  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert "CPU kernels: avx2 (capped by --cpu-isa" in r.stdout + r.stderr


def test_dry_run_with_given_limits_and_dtype():
    env = {"MAX_BATCH_TOTAL_TOKENS": "10000", "MAX_TOTAL_TOKENS": "2048", "DTYPE": "float16"}
    r = run_launcher(["--model-id", str(SMOLLM2_F32), "--dry-run", "--json-output"], env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    plan = json.loads(r.stdout.strip().splitlines()[-1])
    assert plan["max_batch_total_tokens"] == 10000
    assert plan["max_batch_total_tokens_inferred"] is False
    assert plan["max_total_tokens"] == 2048 and plan["max_input_tokens"] == 2047
    w = plan["weights"]
    assert w["stored_dtypes"] == "F32" and w["converted_matrices"] == w["matrices"]
    # F32 -> F16 halves the matrices (the tied head once); what dry-run plans is what is held.
    f32 = sum(p.stat().st_size for p in SMOLLM2_F32.glob("*.safetensors"))
    assert 0.45 * f32 < w["bytes"] < 0.55 * f32


# ---- --dtype, --rope-*, --tokenizer-config-path served -------------------------------------------


def fixture_cases(n: int):
    cases = json.loads((FIXTURES / "smollm2.json").read_text())["cases"]
    return [c for c in cases if c["prompt"] and "<|im_start|>" not in c["prompt"]][:n]


def until_eos(ids: list[int], eos: int = 2) -> list[int]:
    return ids[: ids.index(eos) + 1] if eos in ids else ids


def test_dtype_float32_serves_what_transformers_computes():
    with launch_server(["--model-id", str(SMOLLM2_F32)], env={"DTYPE": "float32"},
                       use_flags_for_port=False) as s:  # fmt: skip
        for case in fixture_cases(3):
            want = until_eos(case["greedy_ids"][:12])
            assert greedy_ids(s, case["prompt"], len(want)) == want, case["prompt"]


@pytest.fixture(scope="module")
def smollm2_f16(tmp_path_factory):
    """smollm2-f32 with its weights stored as F16 (a checkpoint as most Hub models are)."""
    out = tmp_path_factory.mktemp("smollm2-f16")
    for p in SMOLLM2_F32.iterdir():
        if p.suffix != ".safetensors":
            (out / p.name).symlink_to(p)
    for p in SMOLLM2_F32.glob("*.safetensors"):
        save_file({k: v.astype(np.float16) for k, v in load_file(p).items()}, out / p.name)
    return out


def test_dtype_float32_on_an_f16_checkpoint_is_lossless(smollm2_f16):
    prompts = [c["prompt"] for c in fixture_cases(3)]
    with launch_server(["--model-id", str(smollm2_f16)], use_flags_for_port=False) as s:
        as_stored = [greedy_ids(s, p, 12) for p in prompts]
    with launch_server(["--model-id", str(smollm2_f16), "--dtype", "float32"],
                       use_flags_for_port=False) as s:  # fmt: skip
        assert [greedy_ids(s, p, 12) for p in prompts] == as_stored
        logs = s.stdout() + s.stderr()
    assert "--dtype float32: 211 float matrices converted from F16" in logs, logs


def test_rope_flags_replace_the_config_scaling():
    prompt = fixture_cases(1)[0]["prompt"]
    with launch_server(["--model-id", str(SMOLLM2_F32)], use_flags_for_port=False) as s:
        plain = greedy_ids(s, prompt, 12)
    # Linear scaling by 4 squeezes every position: the model reads the prompt differently.
    with launch_server(["--model-id", str(SMOLLM2_F32)], use_flags_for_port=False,
                       env={"ROPE_SCALING": "linear", "ROPE_FACTOR": "4"}) as s:  # fmt: skip
        assert greedy_ids(s, prompt, 12) != plain
    # Dynamic scaling only acts past max_position_embeddings: the same tokens for a short prompt.
    with launch_server(["--model-id", str(SMOLLM2_F32)], use_flags_for_port=False,
                       env={"ROPE_SCALING": "dynamic", "ROPE_FACTOR": "2"}) as s:  # fmt: skip
        assert greedy_ids(s, prompt, 12) == plain


def test_tokenizer_config_path_replaces_the_chat_template(tmp_path):
    config = {"chat_template": "{% for m in messages %}<<{{ m['role'] }}>>{{ m['content'] }}"
                               "{% endfor %}{{ eos_token }}",  # fmt: skip
              "eos_token": "<|endoftext|>"}
    path = tmp_path / "tokenizer_config.json"
    path.write_text(json.dumps(config))
    with launch_server(env={"TOKENIZER_CONFIG_PATH": str(path)}) as s:
        r = s.post("/chat_tokenize", {"messages": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 200, r.text
        assert r.json()["templated_text"] == "<<user>>hi<|endoftext|>"
    missing = run_launcher(["--model-id", MODEL], env={"TOKENIZER_CONFIG_PATH": str(tmp_path / "no")})
    assert missing.returncode == 1
    assert "--tokenizer-config-path" in missing.stdout + missing.stderr
