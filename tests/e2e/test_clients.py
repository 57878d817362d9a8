"""The official clients against the server: text_generation (Client, AsyncClient) and
huggingface_hub.InferenceClient (spec §8)."""

import asyncio
import warnings

import pytest
from huggingface_hub import InferenceClient
from text_generation import AsyncClient, Client
from text_generation.errors import ValidationError
from text_generation.types import FinishReason

from conftest import MAX_INPUT_TOKENS

warnings.filterwarnings("ignore", category=DeprecationWarning)

PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def client(server):
    return Client(server.url, timeout=60)


def test_client_generate(client, server):
    r = client.generate(PROMPT, max_new_tokens=6)
    assert r.generated_text
    d = r.details
    assert d.finish_reason in (FinishReason.Length, FinishReason.EndOfSequenceToken)
    assert d.generated_tokens == len(d.tokens) <= 6
    assert d.seed is None
    assert d.prefill == []
    # The client sends return_full_text=false to POST /: same text as /generate.
    plain = server.post("/generate", {"inputs": PROMPT, "parameters": {"max_new_tokens": 6}})
    assert r.generated_text == plain.json()["generated_text"]


def test_client_generate_stream_matches_generate(client):
    full = client.generate(PROMPT, max_new_tokens=6)
    events = list(client.generate_stream(PROMPT, max_new_tokens=6))
    assert [e.token.id for e in events] == [t.id for t in full.details.tokens]
    assert all(e.generated_text is None for e in events[:-1])
    last = events[-1]
    assert last.generated_text == full.generated_text
    assert last.details.finish_reason == full.details.finish_reason
    assert last.details.generated_tokens == len(events)


def test_client_top_n_tokens(client):
    r = client.generate("Hello", max_new_tokens=3, top_n_tokens=2)
    assert len(r.details.top_tokens) == r.details.generated_tokens
    for chosen, tops in zip(r.details.tokens, r.details.top_tokens):
        assert len(tops) >= 2 and tops[0].id == chosen.id


def test_client_decoder_input_details_empty_prefill(client):
    # TGI v3 answers prefill [] unless prefill logprobs are enabled (--enable-prefill-logprobs).
    r = client.generate("Hello", max_new_tokens=2, decoder_input_details=True)
    assert r.details.prefill == []


def test_client_best_of(client):
    r = client.generate("Once upon a time", max_new_tokens=4, best_of=2, do_sample=True)
    seqs = r.details.best_of_sequences
    assert seqs is not None and len(seqs) == 1
    other = seqs[0]
    assert other.generated_tokens == len(other.tokens)
    assert other.seed is not None and r.details.seed is not None
    assert other.seed != r.details.seed

    def mean_lp(tokens):
        return sum(t.logprob for t in tokens) / len(tokens)

    assert mean_lp(r.details.tokens) >= mean_lp(other.tokens) - 1e-6


def test_client_sampling_with_seed(client):
    a = client.generate("Once upon a time", max_new_tokens=5, do_sample=True, seed=7, top_p=0.9)
    b = client.generate("Once upon a time", max_new_tokens=5, do_sample=True, seed=7, top_p=0.9)
    assert a.generated_text == b.generated_text and a.details.seed == 7


def test_client_stop_sequences(client):
    ref = client.generate(PROMPT, max_new_tokens=8)
    toks = ref.details.tokens
    idx = next(i for i in range(1, len(toks))
               if toks[i].text.strip() and toks[i].text not in "".join(t.text for t in toks[:i]))  # fmt: skip
    r = client.generate(PROMPT, max_new_tokens=8, stop_sequences=[toks[idx].text])
    assert r.details.finish_reason == FinishReason.StopSequence
    assert r.generated_text.endswith(toks[idx].text)


def test_client_validation_errors(client):
    with pytest.raises(ValidationError, match=r"`top_n_tokens` must be >= 0 and <= 5. Given: 10"):
        client.generate("Hello", max_new_tokens=2, top_n_tokens=10)
    with pytest.raises(ValidationError, match="must have less than"):
        client.generate("hello " * (MAX_INPUT_TOKENS + 10), max_new_tokens=2)
    # Streams report errors as an SSE event the client turns into the same exception.
    with pytest.raises(ValidationError, match="must have less than"):
        list(client.generate_stream("hello " * (MAX_INPUT_TOKENS + 10), max_new_tokens=2))
    with pytest.raises(ValidationError, match="must be <= 512"):
        client.generate("Hello", max_new_tokens=600)


def test_async_client(server):
    async def run():
        c = AsyncClient(server.url, timeout=60)
        r = await c.generate(PROMPT, max_new_tokens=5)
        events = [e async for e in c.generate_stream(PROMPT, max_new_tokens=5)]
        with pytest.raises(ValidationError):
            await c.generate("Hello", max_new_tokens=2, top_n_tokens=10)
        # Concurrent requests are batched and each gets its own (greedy, identical) answer.
        many = await asyncio.gather(*[c.generate(PROMPT, max_new_tokens=5) for _ in range(3)])
        return r, events, many

    r, events, many = asyncio.run(run())
    assert events[-1].generated_text == r.generated_text
    assert [e.token.id for e in events] == [t.id for t in r.details.tokens]
    assert all(m.generated_text == r.generated_text for m in many)


def test_async_client_best_of(server):
    async def run():
        return await AsyncClient(server.url, timeout=60).generate(
            "Hi", max_new_tokens=3, best_of=2, do_sample=True
        )

    r = asyncio.run(run())
    assert len(r.details.best_of_sequences) == 1


# ---- huggingface_hub.InferenceClient -------------------------------------------------------------


@pytest.fixture(scope="module")
def hf(server):
    return InferenceClient(base_url=server.url, timeout=60)


def _generated(server, max_new_tokens=6):
    r = server.post("/generate", {"inputs": PROMPT, "parameters": {"max_new_tokens": max_new_tokens}})
    return r.json()["generated_text"]


def test_hf_text_generation_plain(hf, server):
    # InferenceClient leaves return_full_text unset; POST / then defaults it to true because a local
    # model has no Hub pipeline tag (TGI quirk, spec §1.7 / §11.23), so the prompt is echoed.
    text = hf.text_generation(PROMPT, max_new_tokens=6)
    assert isinstance(text, str)
    assert text == PROMPT + _generated(server)
    assert hf.text_generation(PROMPT, max_new_tokens=6, return_full_text=False) == _generated(server)


def test_hf_text_generation_details(hf):
    out = hf.text_generation(PROMPT, max_new_tokens=6, details=True, return_full_text=False)
    assert out.generated_text and not out.generated_text.startswith(PROMPT)
    assert out.details.finish_reason in ("length", "eos_token")
    assert out.details.generated_tokens == len(out.details.tokens)


def test_hf_text_generation_stream(hf, server):
    generated = _generated(server)
    pieces = list(hf.text_generation(PROMPT, max_new_tokens=6, stream=True))
    assert all(isinstance(p, str) for p in pieces)
    assert "".join(pieces) == generated  # token texts only
    events = list(hf.text_generation(PROMPT, max_new_tokens=6, stream=True, details=True))
    assert events[-1].generated_text == PROMPT + generated  # final text with the prompt (POST /)
    assert events[-1].details.generated_tokens == len(events)
