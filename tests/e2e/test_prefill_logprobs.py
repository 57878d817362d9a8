"""Prompt logprobs (TGI's `details.prefill`, `decoder_input_details` with --enable-prefill-logprobs)
against transformers: tests/fixtures/prompt_logprobs/smollm2.json, made by
scripts/fixtures/make_prompt_logprob_references.py on the default model's float copy (smollm2-f32,
fp32 activations here as there). Without the flag the answer stays TGI 3's `prefill: []`
(test_clients.py).
"""
import math
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import PROMPT_LOGPROB_TOLERANCE as TOLERANCE
from conftest import PROMPT_LOGPROBS as FIXTURE


def generate(server, prompt, **params):
    params = {"max_new_tokens": 3, "details": True, "decoder_input_details": True, **params}
    r = server.post("/generate", {"inputs": prompt, "parameters": params}, timeout=300)
    assert r.status_code == 200, r.text
    return r.json()


def check_prefill(prefill, case):
    assert [t["id"] for t in prefill] == case["prompt_ids"]
    assert prefill[0]["logprob"] is None  # the first prompt token has none (NaN -> null)
    got = [t["logprob"] for t in prefill[1:]]
    worst = max(abs(a - b) for a, b in zip(got, case["prompt_logprobs"]))
    assert worst < TOLERANCE, f"max |ours - transformers| = {worst}"


@pytest.mark.parametrize("case", FIXTURE["cases"], ids=lambda c: f"{len(c['prompt_ids'])}-tokens")
def test_prefill_logprobs_equal_transformers(prefill_logprobs_server, case):
    body = generate(prefill_logprobs_server, case["prompt"])
    check_prefill(body["details"]["prefill"], case)
    # Each prompt token's text is that token decoded alone.
    assert "".join(t["text"] for t in body["details"]["prefill"]).strip()


def test_asking_for_them_changes_no_token_and_the_cache_is_bypassed(prefill_logprobs_server):
    case = FIXTURE["cases"][1]
    plain = generate(prefill_logprobs_server, case["prompt"], decoder_input_details=False,
                     max_new_tokens=8)
    assert plain["details"]["prefill"] == []
    for _ in range(2):  # the second time the prompt's blocks are in the prefix cache
        body = generate(prefill_logprobs_server, case["prompt"], max_new_tokens=8)
        assert [t["id"] for t in body["details"]["tokens"]] == \
            [t["id"] for t in plain["details"]["tokens"]]
        check_prefill(body["details"]["prefill"], case)


def test_concurrent_requests_and_best_of_each_get_their_own(prefill_logprobs_server):
    cases = FIXTURE["cases"]
    with ThreadPoolExecutor(len(cases)) as pool:
        bodies = list(pool.map(lambda c: generate(prefill_logprobs_server, c["prompt"]), cases))
    for body, case in zip(bodies, cases):
        check_prefill(body["details"]["prefill"], case)
    body = generate(prefill_logprobs_server, cases[0]["prompt"], best_of=2, do_sample=True)
    check_prefill(body["details"]["prefill"], cases[0])
    for seq in body["details"]["best_of_sequences"]:
        check_prefill(seq["prefill"], cases[0])


def test_the_long_prompt_crosses_a_chunk_boundary():
    # The engine computes a prompt-logprob prompt in chunks of 512 tokens; the fixture's long
    # prompt is longer, so test_prefill_logprobs_equal_transformers covers the boundary.
    assert max(len(c["prompt_ids"]) for c in FIXTURE["cases"]) > 512
    assert all(math.isfinite(x) for c in FIXTURE["cases"] for x in c["prompt_logprobs"])
