"""text-generation-benchmark end to end on the default model: the JSON it writes holds a case per
batch size with prefill and decode statistics, and at a kernel level with the interleaved int8
GEMM (AVX2 and up) the model's Linear weights are interleaved (seven per layer plus the tied
head)."""
import json
import os
import subprocess

import pytest

from conftest import MODEL, ROOT

BENCHMARK = ROOT / "build/src/app/text-generation-benchmark"
DEFAULT_MODEL = str(ROOT / "models/SmolLM2-135M-Instruct.Q4_1.gguf")


# SmolLM2-135M's Linears: 7 a layer x 30 layers, and its tied LM head once.
INTERLEAVED = 7 * 30 + 1


def run_benchmark(tmp_path, *args, env=None):
    if not BENCHMARK.exists():
        pytest.fail(f"{BENCHMARK} not built")
    out = tmp_path / "bench.json"
    subprocess.run([str(BENCHMARK), "--model-id", MODEL, "-b", "1", "-b", "2", "-s", "8", "-d", "4",
                    "-r", "1", "-w", "0", "--num-threads", "2", "--output", str(out), *args],
                   check=True, stdout=subprocess.PIPE, timeout=300, env=env)  # fmt: skip
    return json.loads(out.read_text())


def test_writes_a_case_per_batch_size_and_reports_interleaved_weights(tmp_path):
    doc = run_benchmark(tmp_path)
    assert doc["tool"] == "text-generation-benchmark"
    assert [c["batch_size"] for c in doc["cases"]] == [1, 2]
    for case in doc["cases"]:
        assert case["prefill_tokens_per_second"]["mean"] > 0
        assert case["decode_tokens_per_second"]["mean"] > 0
        assert "decode_roofline_fraction_steps" not in case  # only with --paired-roofline
        assert case["runs"][0]["decode_roofline_fractions"] == []
    if MODEL != DEFAULT_MODEL:
        pytest.skip("the interleaved count below is the default model's")
    assert doc["int8_activations"] is True
    assert doc["interleaved_weights"] == (0 if doc["kernels"] == "scalar" else INTERLEAVED)


def test_fp32_activations_keep_the_weights_in_rows(tmp_path):
    doc = run_benchmark(tmp_path, "--int8-activations", "false")
    assert doc["int8_activations"] is False
    assert doc["interleaved_weights"] == 0


def test_cpu_isa_caps_the_kernels(tmp_path):
    """CPU_ISA (or --cpu-isa) as the launcher's: AVX2 has the interleaved GEMM, the scalar level
    none, so its rows stay rows."""
    doc = run_benchmark(tmp_path, env={**os.environ, "CPU_ISA": "avx2"})
    assert doc["kernels"] == "avx2"
    if MODEL == DEFAULT_MODEL:
        assert doc["interleaved_weights"] == INTERLEAVED
    doc = run_benchmark(tmp_path, env={**os.environ, "CPU_ISA": "scalar"})
    assert doc["kernels"] == "scalar"
    assert doc["interleaved_weights"] == 0
    r = subprocess.run([str(BENCHMARK), "--model-id", MODEL, "--cpu-isa", "avx512vnni"],
                       capture_output=True, text=True, timeout=60)  # fmt: skip
    assert r.returncode == 1
    assert "--cpu-isa must be auto, scalar, avx2, avx-vnni, avx512, avx512-vnni or avx512-bf16, not avx512vnni" in r.stderr


def test_paired_roofline_takes_a_fraction_per_decode_step(tmp_path):
    """--paired-roofline: after every step that only decoded, a read pass of memory, and that step's
    fraction of the bandwidth the pass read (-d 4: 3 such steps a run); a step reads the weights,
    which in the default model are nearly the whole file (its head is the embedding table, or a
    copy of it in interleaved rows, counted in place of the table)."""
    doc = run_benchmark(tmp_path, "--paired-roofline")
    for case in doc["cases"]:
        run = case["runs"][0]
        assert len(run["decode_roofline_fractions"]) == 3
        assert all(f > 0 for f in run["decode_roofline_fractions"])
        assert len(run["read_pass_bytes_per_second"]) == 3
        assert all(b > 0 for b in run["read_pass_bytes_per_second"])
        assert case["decode_roofline_fraction_steps"]["count"] == 3
        assert run["read_probe_seconds"] > 0
    if MODEL != DEFAULT_MODEL:
        pytest.skip("the byte count below is the default model's")
    file_bytes = os.path.getsize(MODEL)
    assert 0.9 * file_bytes < doc["decode_read_bytes"] <= file_bytes
