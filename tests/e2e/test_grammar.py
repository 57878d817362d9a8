"""Constrained output (spec tgi-api.md §7.2): TGI's `parameters.grammar` (json, json_schema, regex)
and OpenAI's `response_format` on the default model, greedy and seeded sampled, plain and
streamed; invalid grammars and --disable-grammar-support are 422 with TGI's error JSON. Every
output must parse and validate, so a mask that lets one wrong token through fails here."""

import json
import re

import jsonschema
import pytest
from openai import OpenAI, UnprocessableEntityError
from pydantic import BaseModel, Field

from conftest import launch_server, sse_events

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 16},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "pets": {"type": "array", "items": {"type": "string", "enum": ["cat", "dog", "fish"]},
                 "maxItems": 3},
    },
    "required": ["name", "age", "pets"],
}
PROMPT = "Describe a person as JSON with a name, an age and their pets."
CODE = r"[A-Z]{2}-[0-9]{3}( ok| late)?"


def generate(server, grammar, **params):
    params.setdefault("max_new_tokens", 96)
    r = server.post("/generate", {"inputs": PROMPT, "parameters": {"grammar": grammar, **params}})
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.parametrize("grammar", [
    {"type": "json", "value": PERSON},
    {"type": "json", "value": json.dumps(PERSON)},  # a string holding the schema
    {"type": "json_object", "value": PERSON},
    {"type": "json_schema", "value": {"name": "person", "schema": PERSON, "strict": True}},
], ids=["json", "json-string", "json_object", "json_schema"])
def test_generate_json_schema_output_validates(server, grammar):
    body = generate(server, grammar, details=True)
    document = json.loads(body["generated_text"])
    jsonschema.validate(document, PERSON)
    assert list(document) == ["name", "age", "pets"]  # the schema's key order
    assert body["details"]["finish_reason"] == "eos_token"


def test_unconstrained_output_is_not_that_json(server):
    # The control: without the grammar the same request does not produce the document.
    r = server.post("/generate", {"inputs": PROMPT, "parameters": {"max_new_tokens": 40}})
    assert r.status_code == 200
    with pytest.raises((json.JSONDecodeError, jsonschema.ValidationError)):
        jsonschema.validate(json.loads(r.json()["generated_text"]), PERSON)


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_sampled_json_validates(server, seed):
    body = generate(server, {"type": "json", "value": PERSON}, do_sample=True, temperature=1.0,
                    seed=seed, details=True)
    jsonschema.validate(json.loads(body["generated_text"]), PERSON)
    assert body["details"]["finish_reason"] == "eos_token"


@pytest.mark.parametrize("seed", [None, 11, 12, 13])
def test_regex_output_fullmatches(server, seed):
    params = {"do_sample": True, "temperature": 1.0, "seed": seed} if seed else {}
    body = generate(server, {"type": "regex", "value": CODE}, max_new_tokens=20, **params)
    assert re.fullmatch(CODE, body["generated_text"]), body["generated_text"]


def test_best_of_candidates_each_follow_the_grammar(server):
    body = generate(server, {"type": "regex", "value": CODE}, max_new_tokens=20, best_of=2,
                    do_sample=True, details=True)
    texts = [body["generated_text"]] + [
        s["generated_text"] for s in body["details"]["best_of_sequences"]]
    assert len(texts) == 2
    for text in texts:
        assert re.fullmatch(CODE, text), text


def test_max_new_tokens_still_ends_it(server):
    body = generate(server, {"type": "json", "value": PERSON}, max_new_tokens=3, details=True)
    assert body["details"]["finish_reason"] == "length"
    assert body["details"]["generated_tokens"] == 3
    assert body["generated_text"].startswith('{"name"'), body["generated_text"]


def test_stream_is_constrained(server):
    r = server.post("/generate_stream", {"inputs": PROMPT, "parameters": {
        "grammar": {"type": "json", "value": PERSON}, "max_new_tokens": 96, "do_sample": True,
        "seed": 7, "details": True}})
    assert r.status_code == 200, r.text
    events = sse_events(r.content)
    text = "".join(e["token"]["text"] for e in events if not e["token"]["special"])
    assert events[-1]["generated_text"] == text
    assert events[-1]["details"]["finish_reason"] == "eos_token"
    jsonschema.validate(json.loads(text), PERSON)


@pytest.mark.parametrize("grammar,detail", [
    ({"type": "json", "value": {"properties": {"a": {"type": "frobnicate"}}}}, "frobnicate"),
    ({"type": "json", "value": {"type": "object"}}, "Grammar must have a 'properties' field"),
    ({"type": "json", "value": "{\"properties\": "}, "grammar is not valid"),
    ({"type": "regex", "value": "[a-z"}, "grammar is not valid"),
    # A standard format XGrammar has no rule for would be any string: refused.
    ({"type": "json", "value": {"properties": {"e": {"type": "string", "format": "idn-email"}}}},
     "it uses `format: idn-email` at /properties/e, which the grammar engine does not enforce"),
])
def test_invalid_grammar_is_422(server, grammar, detail):
    r = server.post("/generate", {"inputs": PROMPT, "parameters": {"grammar": grammar}})
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["error_type"] == "validation"
    assert body["error"].startswith("Input validation error: grammar is not valid: "), body
    assert detail in body["error"]


def oai(server):
    return OpenAI(base_url=server.url + "/v1", api_key="-", max_retries=0, timeout=120)


def test_chat_json_schema_response_format(server):
    response = oai(server).chat.completions.create(
        model="tgi", messages=[{"role": "user", "content": PROMPT}], max_tokens=96,
        response_format={"type": "json_schema",
                         "json_schema": {"name": "person", "schema": PERSON, "strict": True}})
    choice = response.choices[0]
    assert choice.finish_reason == "stop"
    jsonschema.validate(json.loads(choice.message.content), PERSON)


def test_chat_json_object_and_text(server):
    client = oai(server)
    content = client.chat.completions.create(
        model="tgi", messages=[{"role": "user", "content": PROMPT}], max_tokens=96, seed=3,
        response_format={"type": "json_object"}).choices[0].message.content
    assert isinstance(json.loads(content), dict)
    plain = client.chat.completions.create(
        model="tgi", messages=[{"role": "user", "content": "Say hi"}], max_tokens=8,
        temperature=0, response_format={"type": "text"})
    assert plain.choices[0].message.content


class Pet(BaseModel):
    kind: str = Field(max_length=8)
    legs: int = Field(ge=0, le=8)


class Owner(BaseModel):
    name: str = Field(max_length=16)
    pets: list[Pet] = Field(max_length=2)


def test_chat_parse_with_a_pydantic_model(server):
    completion = oai(server).chat.completions.parse(
        model="tgi", messages=[{"role": "user", "content": "Describe a pet owner."}],
        max_tokens=128, response_format=Owner)
    owner = completion.choices[0].message.parsed
    assert isinstance(owner, Owner)
    assert len(owner.pets) <= 2


def test_chat_stream_with_response_format(server):
    stream = oai(server).chat.completions.create(
        model="tgi", messages=[{"role": "user", "content": PROMPT}], max_tokens=96, stream=True,
        seed=5, response_format={"type": "json_schema",
                                 "json_schema": {"name": "person", "schema": PERSON}})
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert chunks[-1].choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(text), PERSON)


def test_chat_invalid_schema_is_422_with_tgis_error(server):
    r = server.post("/v1/chat/completions", {
        "messages": [{"role": "user", "content": "x"}],
        "response_format": {"type": "json_schema", "json_schema": {
            "name": "bad", "schema": {"properties": {"a": {"type": "frobnicate"}}}}}})
    assert r.status_code == 422, r.text
    assert r.json()["error_type"] == "validation"
    message = r.json()["error"]["message"]  # OpenAI's error shape (README: where we differ)
    assert message.startswith("Input validation error: grammar is not valid: "), message
    assert "frobnicate" in message
    with pytest.raises(UnprocessableEntityError):
        oai(server).chat.completions.create(
            model="tgi", messages=[{"role": "user", "content": "x"}],
            response_format={"type": "json_schema", "json_schema": {
                "name": "bad", "schema": {"properties": {"a": {"type": "frobnicate"}}}}})


def test_grammar_and_tools_are_exclusive(server):
    r = server.post("/v1/chat/completions", {
        "messages": [{"role": "user", "content": "x"}], "tools": [],
        "response_format": {"type": "json_object"}})
    assert r.status_code == 422
    assert r.json()["error"]["message"] == "Tool error: Grammar and tools are mutually exclusive"
    assert r.json()["error_type"] == "tool_error"


def test_disable_grammar_support_refuses_grammars():
    with launch_server(["--disable-grammar-support"]) as s:
        r = s.post("/generate", {"inputs": "x", "parameters": {
            "grammar": {"type": "regex", "value": "a+"}}})
        assert r.status_code == 422
        assert r.json() == {"error": "Input validation error: grammar is not supported",
                            "error_type": "validation"}
        r = s.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                                             "response_format": {"type": "json_object"}})
        assert r.status_code == 422
        assert r.json()["error"]["message"] == "Input validation error: grammar is not supported"
        assert s.post("/generate", {"inputs": "x", "parameters": {"max_new_tokens": 2}}).ok


def test_compile_time_metric_counts_cache_misses_and_hits(server):
    # A schema no other test sends is compiled once, then served from the grammar cache.
    schema = {"type": "object", "properties": {"compile_metric_probe": {"type": "integer"}},
              "required": ["compile_metric_probe"]}
    name = "lm_grammar_compile_duration_seconds_count"
    before = server.metrics()
    for _ in range(3):
        generate(server, {"type": "json", "value": schema}, max_new_tokens=12)
    after = server.metrics()
    delta = {k: after.get(f'{name}{{cache="{k}"}}', 0) - before.get(f'{name}{{cache="{k}"}}', 0)
             for k in ("miss", "hit")}
    assert delta == {"miss": 1, "hit": 2}
    assert after[f'lm_grammar_compile_duration_seconds_sum{{cache="miss"}}'] > 0
