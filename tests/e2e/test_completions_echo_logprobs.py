"""OpenAI's legacy /v1/completions with `echo` and `logprobs` (what lm-evaluation-harness's
`local-completions` model sends for loglikelihood tasks): the prompt's tokens with their logprobs
come before the generated ones, the first with null logprob and null top_logprobs, text_offset in
characters of the echoed text. Checked with the real `openai` client against transformers
(tests/fixtures/prompt_logprobs/smollm2.json) on the default model's float copy started with
--enable-prefill-logprobs; without the flag echo with logprobs is refused (test_openai.py).
"""
import math

import pytest
from openai import OpenAI, UnprocessableEntityError

from conftest import PROMPT_LOGPROB_TOLERANCE as TOLERANCE
from conftest import PROMPT_LOGPROBS as FIXTURE

CASES = FIXTURE["cases"]
SHORT = [c for c in CASES if len(c["prompt_ids"]) < 100]  # one request: <= 4 prompts


@pytest.fixture(scope="module")
def oai(prefill_logprobs_server):
    return OpenAI(base_url=prefill_logprobs_server.url + "/v1", api_key="-", max_retries=0,
                  timeout=300)


def echo(oai, prompt, **kw):
    kw = {"max_tokens": 1, "temperature": 0, "logprobs": 1, **kw}
    return oai.completions.create(model="tgi", prompt=prompt, echo=True, **kw)


def check_prompt_entries(lp, case):
    """The echoed prompt's entries against transformers: logprobs and the best token's."""
    n = len(case["prompt_ids"])
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
    got = lp.token_logprobs[1:n]
    worst = max(abs(a - b) for a, b in zip(got, case["prompt_logprobs"]))
    assert worst < TOLERANCE, f"max |ours - transformers| = {worst}"
    for i in range(1, n):
        top = lp.top_logprobs[i]
        # logprobs=1: the best token, and the prompt token too when it is not the best.
        greedy = case["greedy_ids"][i - 1] == case["prompt_ids"][i]
        assert len(top) == (1 if greedy else 2), (i, top)
        assert abs(max(top.values()) - case["greedy_logprobs"][i - 1]) < TOLERANCE
        assert min(top.values()) == pytest.approx(lp.token_logprobs[i], abs=1e-6)


def check_offsets(text, lp):
    """Each token's text sits at its text_offset (in characters) of the choice's text."""
    assert lp.text_offset[0] == 0
    assert lp.text_offset == sorted(lp.text_offset)
    for token, offset in zip(lp.tokens, lp.text_offset):
        assert text[offset:offset + len(token)] == token, (token, offset)
    assert "".join(lp.tokens) == text


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{len(c['prompt_ids'])}-tokens")
def test_echoed_prompt_logprobs_equal_transformers(oai, case):
    r = echo(oai, case["prompt"], max_tokens=2)
    (c,) = r.choices
    n = len(case["prompt_ids"])
    assert c.text.startswith(case["prompt"])
    assert r.usage.prompt_tokens == n and r.usage.completion_tokens == 2
    lp = c.logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == n + 2
    check_prompt_entries(lp, case)
    check_offsets(c.text, lp)
    # The generated tokens follow, each with a logprob and its alternatives (greedy: the best).
    assert lp.text_offset[n] == len(case["prompt"])
    for i in (n, n + 1):
        assert lp.token_logprobs[i] <= 0 and len(lp.top_logprobs[i]) == 1
        assert max(lp.top_logprobs[i].values()) == lp.token_logprobs[i]


def test_max_tokens_0_scores_the_prompt_only(oai):
    case = CASES[3]  # non-ASCII: offsets count characters, not bytes
    r = echo(oai, case["prompt"], max_tokens=0)
    (c,) = r.choices
    assert c.text == case["prompt"]
    assert c.finish_reason == "length"
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (len(case["prompt_ids"]), 0)
    assert len(c.logprobs.tokens) == len(case["prompt_ids"])
    check_prompt_entries(c.logprobs, case)
    check_offsets(c.text, c.logprobs)
    assert len(c.text) < len(c.text.encode())


def loglikelihood(choice, ctxlen):
    """lm-evaluation-harness's local-completions parse_logprobs (max_tokens=1: the generated
    token is the last entry, dropped)."""
    token_logprobs = choice.logprobs.token_logprobs[ctxlen:-1]
    top_logprobs = choice.logprobs.top_logprobs[ctxlen:-1]
    is_greedy = all(tok == max(top.values()) for tok, top in zip(token_logprobs, top_logprobs))
    return sum(token_logprobs), is_greedy


def reference_loglikelihood(case, ctxlen):
    ids = case["prompt_ids"]
    return (sum(case["prompt_logprobs"][ctxlen - 1:]),
            all(case["greedy_ids"][i - 1] == ids[i] for i in range(ctxlen, len(ids))))


@pytest.mark.parametrize("as_ids", [True, False], ids=["token-ids", "text"])
def test_loglikelihood_as_lm_eval_computes_it(oai, as_ids):
    # One request for several prompts (choices sorted by index, as lm-eval does), as token ids
    # (lm-eval's default, tokenized_requests=True) or text; then every split of each prompt into
    # context and continuation.
    r = echo(oai, [c["prompt_ids"] if as_ids else c["prompt"] for c in SHORT])
    choices = sorted(r.choices, key=lambda c: c.index)
    assert len(choices) == len(SHORT)
    assert r.usage.prompt_tokens == sum(len(c["prompt_ids"]) for c in SHORT)
    num_greedy = 0
    for choice, case in zip(choices, SHORT):
        assert choice.text.startswith(case["prompt"])
        for ctxlen in range(1, len(case["prompt_ids"])):
            got, got_greedy = loglikelihood(choice, ctxlen)
            want, want_greedy = reference_loglikelihood(case, ctxlen)
            assert abs(got - want) < TOLERANCE * (len(case["prompt_ids"]) - ctxlen), ctxlen
            assert got_greedy == want_greedy, (case["prompt"], ctxlen)
            num_greedy += got_greedy
    assert num_greedy > 0  # both answers are exercised


def test_n_choices_each_carry_the_prompt(oai):
    case = CASES[1]
    r = echo(oai, case["prompt"], n=2, max_tokens=3, temperature=1.0, seed=5, logprobs=2)
    assert sorted(c.index for c in r.choices) == [0, 1]
    n = len(case["prompt_ids"])
    for c in r.choices:
        lp = c.logprobs
        assert len(lp.tokens) == n + 3
        worst = max(abs(a - b) for a, b in zip(lp.token_logprobs[1:n], case["prompt_logprobs"]))
        assert worst < TOLERANCE
        # logprobs=2: two alternatives, plus the token itself when it is neither.
        assert all(2 <= len(top) <= 3 for top in lp.top_logprobs[1:])
        check_offsets(c.text, lp)


def test_stream_carries_the_prompt_in_its_first_chunk(oai):
    case = CASES[0]
    n = len(case["prompt_ids"])
    whole = echo(oai, case["prompt"], max_tokens=3).choices[0]
    chunks = [c.choices[0] for c in echo(oai, case["prompt"], max_tokens=3, stream=True)]
    assert len(chunks) == 3
    # vLLM's shape: the first chunk is the prompt and the first token, with their entries.
    assert len(chunks[0].logprobs.tokens) == n + 1
    assert chunks[0].text == "".join(chunks[0].logprobs.tokens)
    assert all(len(c.logprobs.tokens) == 1 for c in chunks[1:])
    assert "".join(c.text for c in chunks) == whole.text
    streamed = {key: sum((getattr(c.logprobs, key) for c in chunks), [])
                for key in ("tokens", "token_logprobs", "text_offset")}
    assert streamed["tokens"] == whole.logprobs.tokens
    assert streamed["text_offset"] == whole.logprobs.text_offset
    assert streamed["token_logprobs"][0] is None
    assert all(math.isclose(a, b, abs_tol=1e-5)
               for a, b in zip(streamed["token_logprobs"][1:], whole.logprobs.token_logprobs[1:]))
    # max_tokens 0: one chunk, the prompt, with its usage.
    (only,) = list(echo(oai, case["prompt"], max_tokens=0, stream=True))
    assert only.choices[0].text == case["prompt"]
    assert only.choices[0].finish_reason == "length"
    assert len(only.choices[0].logprobs.tokens) == n
    assert only.usage.completion_tokens == 0


def test_token_id_prompts_run_as_given(oai):
    # A case's ids reversed ("... capitalThe"), which tokenizing their text need not give back:
    # the prompt is exactly those tokens, its text what they decode to.
    ids = CASES[0]["prompt_ids"][::-1]
    r = echo(oai, ids, max_tokens=0)
    (c,) = r.choices
    assert r.usage.prompt_tokens == len(c.logprobs.tokens) == len(ids)
    assert c.text == "".join(c.logprobs.tokens) and c.text.endswith("The")
    with pytest.raises(UnprocessableEntityError, match="not in the vocabulary"):
        echo(oai, [10**8])


def test_echo_alone_and_logprobs_alone_are_unchanged(oai):
    case = CASES[0]
    r = oai.completions.create(model="tgi", prompt=case["prompt"], echo=True, max_tokens=0,
                               temperature=0)
    assert r.choices[0].text == case["prompt"] and r.choices[0].logprobs is None
    r = oai.completions.create(model="tgi", prompt=case["prompt"], logprobs=1, max_tokens=2,
                               temperature=0)
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == 2 and lp.text_offset[0] == 0 and None not in lp.token_logprobs
    with pytest.raises(UnprocessableEntityError, match="strictly positive"):
        oai.completions.create(model="tgi", prompt=case["prompt"], max_tokens=0)
