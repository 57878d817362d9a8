"""Constrained output through the official clients (text_generation's Client with a Grammar,
huggingface_hub's InferenceClient text_generation(grammar=) and chat_completion(response_format=))
and on a tiny random-weight model, whose unconstrained output is garbage: there every valid
output is the mask's doing alone."""

import json
import re

import jsonschema
import pytest
from huggingface_hub import InferenceClient
from text_generation import Client
from text_generation.types import Grammar, GrammarType

from conftest import launch_server
from tiny_random_model import SMOLLM2_TOKENIZER, write_model

RECORD = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]},
                 "minItems": 1, "maxItems": 3},
        "ok": {"type": "boolean"},
    },
    "required": ["name", "age", "tags", "ok"],
    "additionalProperties": False,
}
CODE = r"[A-Z]{2}-[0-9]{3}( ok| late)?"
PROMPT = "Give me a record as JSON."


@pytest.fixture(scope="module")
def random_server(tmp_path_factory):
    if not (SMOLLM2_TOKENIZER / "tokenizer.json").exists():
        pytest.fail(f"{SMOLLM2_TOKENIZER} missing: run `make fixtures-test`")
    folder = tmp_path_factory.mktemp("grammar-random-tiny")
    write_model(folder)
    with launch_server(["--model-id", str(folder)], use_flags_for_port=False) as s:
        yield s


def completed_outputs(client, grammar, seeds, max_new_tokens=200):
    """The text of each seeded sampled completion that ended by itself (not at the limit)."""
    out = []
    for seed in seeds:
        r = client.generate(PROMPT, max_new_tokens=max_new_tokens, do_sample=True,
                            temperature=1.0, seed=seed, grammar=grammar)
        if r.details.finish_reason.value != "length":
            out.append(r.generated_text)
    return out


def test_random_model_unconstrained_is_garbage(random_server):
    r = Client(random_server.url, timeout=120).generate(PROMPT, max_new_tokens=40)
    with pytest.raises(ValueError):
        json.loads(r.generated_text)


def test_random_model_json_schema_outputs_validate(random_server):
    client = Client(random_server.url, timeout=120)
    outputs = completed_outputs(client, Grammar(type=GrammarType.Json, value=RECORD), range(1, 9))
    assert len(outputs) >= 4, outputs  # most end by themselves: the grammar closes the object
    for text in outputs:
        jsonschema.validate(json.loads(text), RECORD)


def test_random_model_regex_outputs_fullmatch(random_server):
    client = Client(random_server.url, timeout=120)
    outputs = completed_outputs(client, Grammar(type=GrammarType.Regex, value=CODE), range(1, 9),
                                max_new_tokens=16)
    assert len(outputs) == 8
    for text in outputs:
        assert re.fullmatch(CODE, text), text


def test_text_generation_client_grammar(server):
    r = Client(server.url, timeout=60).generate(PROMPT, max_new_tokens=120,
                        grammar=Grammar(type=GrammarType.Json, value=RECORD))
    jsonschema.validate(json.loads(r.generated_text), RECORD)


def test_huggingface_hub_text_generation_grammar(server):
    # return_full_text=False: unset, POST / echoes the prompt for a model without a Hub pipeline
    # tag (TGI's quirk, test_clients.py).
    hf = InferenceClient(base_url=server.url, timeout=60)
    text = hf.text_generation(PROMPT, max_new_tokens=120, return_full_text=False,
                              grammar={"type": "json", "value": RECORD})
    jsonschema.validate(json.loads(text), RECORD)
    code = hf.text_generation("A ticket code:", max_new_tokens=16, return_full_text=False,
                              grammar={"type": "regex", "value": CODE})
    assert re.fullmatch(CODE, code), code


@pytest.mark.parametrize("response_format", [
    {"type": "json", "value": RECORD},  # TGI's grammar shape
    {"type": "json_schema", "json_schema": {"name": "record", "schema": RECORD, "strict": True}},
], ids=["tgi", "openai"])
def test_huggingface_hub_chat_completion_response_format(server, response_format):
    hf = InferenceClient(base_url=server.url, timeout=60)
    out = hf.chat_completion([{"role": "user", "content": PROMPT}], max_tokens=120,
                             response_format=response_format)
    jsonschema.validate(json.loads(out.choices[0].message.content), RECORD)
