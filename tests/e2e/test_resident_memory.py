"""Resident memory follows the working set (README "Resident memory"): distinct prompts fill the
prefix cache only up to --prefix-cache-max-mib, the blocks past it are handed back to the OS, and
/metrics reports the resident KV bytes; without a budget the cache keeps every prompt resident."""

import json
import subprocess
import time

from conftest import LAUNCHER, MODEL, bounds_resident_memory, launch_server

# The default model: 30 layers x 2 (K, V) x 3 KV heads x 64 dims x 2 bytes per token (its
# default fp16 cache).
KV_BYTES_PER_TOKEN = 30 * 2 * 3 * 64 * 2
BLOCK_BYTES = 16 * KV_BYTES_PER_TOKEN
PROMPTS = 10
BUDGET_MIB = 4


def _rss_bytes(pid) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _distinct_prompt(i: int) -> str:
    # ~300 tokens, no shared prefix beyond the first few tokens.
    return f"Record {i}: " + " ".join(f"item{(j * 31 + i * 977) % 5003}" for j in range(100))


def _serve_distinct_prompts(server) -> tuple[float, int, int]:
    """Resident KV bytes after the prompts, the RSS growth they caused and cached tokens."""
    rss_before = _rss_bytes(server.proc.pid)
    for i in range(PROMPTS):
        r = server.post("/generate", {"inputs": _distinct_prompt(i), "parameters": {"max_new_tokens": 1}},
                        timeout=300)
        assert r.status_code == 200, r.text
    # The answer goes out before the engine frees the sequence's blocks: wait for that.
    deadline = time.monotonic() + 30
    while (m := server.metrics())["tgi_kv_cache_blocks_used"] != 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert m["tgi_kv_cache_blocks_used"] == 0
    assert m["lm_kv_cache_resident_bytes"] == m["tgi_kv_cache_blocks_resident"] * BLOCK_BYTES
    return m["lm_kv_cache_resident_bytes"], _rss_bytes(server.proc.pid) - rss_before, m["tgi_prefix_cache_query_tokens"]


@bounds_resident_memory
def test_the_prefix_cache_budget_bounds_resident_kv_memory():
    common = ["--max-batch-total-tokens", "40000", "--max-input-tokens", "1000", "--max-total-tokens", "1024",
              "--max-batch-prefill-tokens", "1024"]
    with launch_server(common + ["--prefix-cache-max-mib", str(BUDGET_MIB)]) as bounded:
        resident, rss_growth, query_tokens = _serve_distinct_prompts(bounded)
    assert query_tokens > PROMPTS * 250
    # The budget's blocks plus the one request's working set (its prompt's blocks are freed or
    # cached when it ends, so at most the budget stays, plus the reused free blocks).
    budget_blocks = BUDGET_MIB * 2**20 // BLOCK_BYTES
    working_set_blocks = 1024 // 16 + 1
    assert resident <= (budget_blocks + working_set_blocks) * BLOCK_BYTES, resident
    # The process itself: the KV pages handed back do not stay in its RSS (slack for the
    # allocator and the HTTP buffers).
    assert rss_growth < resident + 32 * 2**20, (rss_growth, resident)

    with launch_server(common + ["--prefix-cache-max-mib", "-1"]) as unbounded:
        resident_unbounded, rss_growth_unbounded, _ = _serve_distinct_prompts(unbounded)
    # Every prompt's full blocks stay cached and resident.
    assert resident_unbounded >= PROMPTS * 250 // 16 * BLOCK_BYTES, resident_unbounded
    assert rss_growth_unbounded > rss_growth + (resident_unbounded - resident) // 2, (
        rss_growth_unbounded, rss_growth)


def test_the_budget_is_in_the_start_plan():
    out = subprocess.run([str(LAUNCHER), "--model-id", MODEL, "--dry-run", "--json-output",
                          "--max-batch-total-tokens", "16000", "--prefix-cache-max-mib", "3"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout.strip().splitlines()[-1])
    assert plan["prefix_cache_max_blocks"] == 3 * 2**20 // BLOCK_BYTES
    out = subprocess.run([str(LAUNCHER), "--model-id", MODEL, "--dry-run", "--json-output",
                          "--max-batch-total-tokens", "16000"], capture_output=True, text=True, timeout=120)
    plan = json.loads(out.stdout.strip().splitlines()[-1])
    assert plan["prefix_cache_max_blocks"] == (plan["kv_num_blocks"] - 1) // 4
