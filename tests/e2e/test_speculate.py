"""`--speculate N` (n-gram speculation): the same outputs as a server without it, over HTTP.

Two servers of the default model, one with `--speculate 3`: /generate (greedy, seeded sampling,
stop sequences, top tokens), /generate_stream and OpenAI n = 3 seeded choices give the same
tokens, logprobs and texts, each streamed token its own event; the speculating server's metrics
show proposals accepted, so the comparison is not vacuous.
"""

import json
import os
import subprocess
import time

from conftest import LAUNCHER, MODEL, ROOT, gen_body, launch_server, sse_events, vllm_series

# A "rewrite this text" prompt: the answer repeats the text, so n-gram proposals get accepted.
TEXT = ("The quick brown fox jumps over the lazy dog. The dog sleeps in the sun all day long, "
        "and the fox runs back into the forest before the farmer wakes up.")
REWRITE = f"Repeat this text exactly.\nText: {TEXT}\nRepeated text: {TEXT}\nRepeated text:"

REQUESTS = [
    gen_body(REWRITE, max_new_tokens=40, details=True, top_n_tokens=2),
    gen_body(REWRITE, max_new_tokens=30, details=True, do_sample=True, seed=7, temperature=0.7),
    gen_body(REWRITE, max_new_tokens=40, details=True, stop=["sun"]),
    gen_body("List the days of the week: Monday, Tuesday,", max_new_tokens=24, details=True,
             repetition_penalty=1.2),
]


# OpenAI's n: three seeded sampled choices of one prompt, each its own sequence (the first keeps
# the seed, the others draw theirs from it), speculating side by side.
CHAT = {"model": "m", "messages": [{"role": "user", "content": REWRITE}], "n": 3, "seed": 5,
        "temperature": 0.8, "max_tokens": 24, "logprobs": True}  # fmt: skip


def run(server):
    answers = [server.post("/generate", body).json() for body in REQUESTS]
    streamed = sse_events(server.post("/generate_stream", REQUESTS[0]).content)
    choices = server.post("/v1/chat/completions", CHAT).json()["choices"]
    chat = [(c["message"]["content"], [(t["token"], t["logprob"]) for t in c["logprobs"]["content"]])
            for c in sorted(choices, key=lambda c: c["index"])]  # fmt: skip
    return answers, streamed, chat, settled_metrics(server)


def settled_metrics(server):
    """/metrics once the engine shows no running request: a response leaves during its last step,
    whose counters and histograms are recorded after it."""
    deadline = time.monotonic() + 10
    while True:
        metrics = server.metrics()
        # Every scrape sets the gauge, so a misspelt key fails here instead of settling at once.
        running = metrics[vllm_series("vllm:num_requests_running")]
        if running == 0 or time.monotonic() > deadline:
            return metrics
        time.sleep(0.05)


def tokens(answer):
    return [(t["id"], t["logprob"], t.get("top_tokens")) for t in answer["details"]["tokens"]]


def test_speculation_gives_the_outputs_of_plain_decoding():
    with launch_server() as plain_server:
        plain, plain_stream, plain_chat, _ = run(plain_server)
    # Every step proposes (the adaptive default may measure proposals as not paying and skip them).
    with launch_server(["--speculate", "3", "--adaptive-speculation", "false"]) as spec_server:
        spec, spec_stream, spec_chat, metrics = run(spec_server)
        logs = spec_server.stdout() + spec_server.stderr()
    assert "Speculation: up to 3 n-gram tokens proposed per decode step" in logs
    for got, want in zip(spec, plain, strict=True):
        assert got["generated_text"] == want["generated_text"]
        assert got["details"]["finish_reason"] == want["details"]["finish_reason"]
        assert tokens(got) == tokens(want)
    assert plain[2]["details"]["finish_reason"] == "stop_sequence"
    assert plain[2]["generated_text"].endswith("sun")
    # Streaming: one event per token, in order, the same as without speculation.
    assert [e["token"]["id"] for e in spec_stream] == [e["token"]["id"] for e in plain_stream]
    assert spec_stream[-1]["generated_text"] == plain_stream[-1]["generated_text"]
    assert spec_chat == plain_chat
    assert len({text for text, _ in plain_chat}) > 1  # three draws, not one
    # Proposals were verified and accepted, and the summary shows the extra tokens.
    assert metrics["tgi_speculative_accepted_tokens"] > 10
    assert metrics["tgi_speculative_proposed_tokens"] >= metrics["tgi_speculative_accepted_tokens"]
    assert metrics["tgi_request_skipped_tokens_sum"] == metrics["tgi_speculative_accepted_tokens"]
    # vLLM's counters say the same (tools that read a vLLM server's acceptance read ours), and
    # the per-request histograms hold every request's totals.
    accepted = metrics["tgi_speculative_accepted_tokens"]
    proposed = metrics["tgi_speculative_proposed_tokens"]
    assert metrics[vllm_series("vllm:spec_decode_num_accepted_tokens_total")] == accepted
    assert metrics[vllm_series("vllm:spec_decode_num_draft_tokens_total")] == proposed
    assert 0 < metrics[vllm_series("vllm:spec_decode_num_drafts_total")] <= proposed
    per_position = vllm_series("vllm:spec_decode_num_accepted_tokens_per_pos_total", 'position="0"')
    assert metrics[per_position] > 0
    assert abs(metrics["lm_speculative_acceptance_rate"] - accepted / proposed) < 1e-6
    assert metrics["lm_request_speculative_accepted_tokens_sum"] == accepted
    assert metrics["lm_request_speculative_proposed_tokens_sum"] == proposed
    assert metrics["lm_request_speculative_accepted_tokens_count"] == len(REQUESTS) + 1 + len(spec_chat)


def launcher(args=(), env=None) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if k not in ("HOSTNAME", "PORT", "MODEL_ID")}
    full_env.update(env or {})
    return subprocess.run([str(LAUNCHER), "--model-id", MODEL, "--port", "1", *args], env=full_env,
                          cwd=ROOT, capture_output=True, text=True, timeout=120)  # fmt: skip


def test_speculate_from_the_environment_in_the_plan_and_its_range():
    r = launcher(["--dry-run"], env={"SPECULATE": "2"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Speculation: up to 2 n-gram tokens per decode step" in r.stdout
    r = launcher(["--dry-run", "--json-output", "--speculate", "5"])
    assert json.loads(r.stdout.strip().splitlines()[-1])["speculate"] == 5
    r = launcher(["--dry-run"])
    assert "Speculation: off" in r.stdout
    for bad in ("-1", "65"):
        r = launcher(env={"SPECULATE": bad})
        assert r.returncode == 1
        assert "`speculate` must be in 0..64" in r.stdout + r.stderr


def test_a_draft_model_gives_the_outputs_of_plain_decoding():
    """--speculative-model-id: the default model drafting for itself (its greedy proposals are
    the model's own choices, so most are accepted); every answer as without speculation."""
    with launch_server() as plain_server:
        plain, plain_stream, plain_chat, _ = run(plain_server)
    with launch_server(["--speculative-model-id", MODEL, "--adaptive-speculation", "false"]) as s:
        spec, spec_stream, spec_chat, metrics = run(s)
        logs = s.stdout() + s.stderr()
    assert "Speculation: up to 4 tokens proposed per decode step by the draft model" in logs
    assert "in every decode step (--adaptive-speculation false)" in logs
    # Adaptive (the default): proposals only where measured to pay; the same outputs either way.
    with launch_server(["--speculative-model-id", MODEL]) as s:
        adaptive, adaptive_stream, adaptive_chat, _ = run(s)
        logs = s.stdout() + s.stderr()
    assert "only in the steps where it is measured to pay" in logs
    assert [tokens(a) for a in adaptive] == [tokens(p) for p in plain]
    assert [e["token"]["id"] for e in adaptive_stream] == [e["token"]["id"] for e in plain_stream]
    for got, want in zip(spec, plain, strict=True):
        assert got["generated_text"] == want["generated_text"]
        assert got["details"]["finish_reason"] == want["details"]["finish_reason"]
        assert tokens(got) == tokens(want)
    assert [e["token"]["id"] for e in spec_stream] == [e["token"]["id"] for e in plain_stream]
    assert spec_chat == plain_chat and adaptive_chat == plain_chat
    # The greedy requests' proposals are all the model's own choices.
    assert metrics["tgi_speculative_accepted_tokens"] > 60
    assert metrics["tgi_speculative_proposed_tokens"] >= metrics["tgi_speculative_accepted_tokens"]


def test_a_draft_model_in_the_plan_and_one_with_another_vocabulary_refused():
    r = launcher(["--dry-run", "--json-output", "--speculative-model-id", MODEL])
    assert r.returncode == 0, r.stdout + r.stderr
    plan = json.loads(r.stdout.strip().splitlines()[-1])
    assert plan["speculate"] == 4
    assert plan["speculative_model_path"] == MODEL
    assert plan["adaptive_speculation"] is True
    r = launcher(["--dry-run", "--speculate", "2"], env={"SPECULATIVE_MODEL_ID": MODEL})
    assert f"Speculation: up to 2 tokens per decode step from the draft model {MODEL}" in r.stdout
    # Tiny fixture models: another vocabulary, and none.
    other = str(LAUNCHER.parents[2] / "test-models/gemma-gguf/model.gguf")
    r = launcher(["--dry-run", "--speculative-model-id", other])
    assert r.returncode == 1
    assert (f"--speculative-model-id {other}: its vocabulary has 384 tokens, the model's 49152 "
            "(a draft must share the model's tokenizer)") in r.stdout + r.stderr  # fmt: skip
    none = str(LAUNCHER.parents[2] / "test-models/kquant-gguf/model-kquants.gguf")
    r = launcher(["--dry-run", "--speculative-model-id", none])
    assert r.returncode == 1
    assert f"--speculative-model-id {none}: " in r.stdout + r.stderr
    r = launcher(["--dry-run", "--speculative-model-id", "/nonexistent/draft.gguf"])
    assert r.returncode == 1
    assert "--speculative-model-id /nonexistent/draft.gguf: " in r.stdout + r.stderr
