"""Tools through a chat template that renders them (spec tgi-api.md §7.3): a tiny random-weight
Llama with SmolLM2's tokenizer and Qwen2.5-Instruct's template (the Hermes-style `<tools>` block,
tests/fixtures/templates/sources/Qwen-Qwen2.5-7B-Instruct.jinja). The prompt must be what Python
jinja2, configured as transformers configures it, renders from the same messages and TGI's tools
list, with TGI's tool prompt appended to the last message and no tools JSON there; and the
grammar must turn the model's garbage into calls that validate against the tools' schemas."""

import json

import jinja2
import jsonschema
import pytest
import requests
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment
from openai import OpenAI

from conftest import ROOT, launch_server
from tiny_random_model import SMOLLM2_TOKENIZER, write_model

TEMPLATE = ROOT / "tests/fixtures/templates/sources/Qwen-Qwen2.5-7B-Instruct.jinja"
DEFAULT_TOOL_PROMPT = (
    "\nGiven the functions available, please respond with a JSON for a function call with its "
    "proper arguments that best answers the given prompt. Respond in the format {name: function "
    "name, parameters: dictionary of argument name and its value}.Do not use variables.\n")
WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 12},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city", "unit"],
}
PING = {"type": "object", "properties": {"host": {"type": "string", "enum": ["a", "b"]}},
        "required": ["host"]}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Current weather",
                                      "parameters": WEATHER}},
    {"type": "function", "function": {"name": "ping", "parameters": PING}},
]
SCHEMAS = {"get_weather": WEATHER, "ping": PING}
# The function tool_choice auto adds (src/server/openai/chat_tools.cc).
NO_TOOL = {"type": "object", "properties": {"content": {"type": "string"}},
           "required": ["content"]}
ASK = [{"role": "system", "content": "Be brief."},
       {"role": "user", "content": "Weather in Paris?"}]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    if not (SMOLLM2_TOKENIZER / "tokenizer.json").exists():
        pytest.fail(f"{SMOLLM2_TOKENIZER} missing: run `make fixtures-test`")
    folder = tmp_path_factory.mktemp("qwen25-template-tiny")
    return folder, write_model(folder, TEMPLATE.read_text())


@pytest.fixture(scope="module")
def server(model):
    env = {"MAX_INPUT_TOKENS": "3000", "MAX_TOTAL_TOKENS": "3500"}
    with launch_server(["--model-id", str(model[0])], env=env, use_flags_for_port=False) as s:
        yield s


@pytest.fixture(scope="module")
def oai(server):
    return OpenAI(base_url=server.url + "/v1", api_key="-", max_retries=0, timeout=120)


def jinja_render(tokenizer_config, messages, tools):
    """The template rendered as transformers renders it (its _compile_jinja_template)."""
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env.from_string(tokenizer_config["chat_template"]).render(
        messages=messages, tools=tools, add_generation_prompt=True,
        bos_token=tokenizer_config["bos_token"], eos_token=tokenizer_config["eos_token"])


def template_tools(tools, with_no_tool):
    """The tools as TGI hands them to the template: the schema as a compact JSON string under
    `arguments` (chat_tools.h template_tools_json)."""
    out = [{"type": "function", "function": {
        "description": t["function"].get("description"), "name": t["function"]["name"],
        "arguments": json.dumps(t["function"]["parameters"], separators=(",", ":"))}}
        for t in tools]
    if with_no_tool:
        out.append({"type": "function", "function": {
            "description": "Open ended response with no specific tool selected",
            "name": "no_tool", "arguments": json.dumps(NO_TOOL, separators=(",", ":"))}})
    return out


def templated_text(server, **body):
    r = requests.post(server.url + "/chat_tokenize", json={"messages": ASK, **body}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()["templated_text"]


@pytest.mark.parametrize("choice,tool_prompt", [
    ("auto", None), ("required", None), ("auto", "PICK ONE"),
    ({"type": "function", "function": {"name": "ping"}}, None)])
def test_prompt_is_the_templates_rendering_of_tgis_tools(server, model, choice, tool_prompt):
    body = {"tools": TOOLS, "tool_choice": choice}
    if tool_prompt:
        body["tool_prompt"] = tool_prompt
    text = templated_text(server, **body)
    if isinstance(choice, dict):
        offered = template_tools([TOOLS[1]], with_no_tool=False)
    else:
        offered = template_tools(TOOLS, with_no_tool=choice == "auto")
    # The template renders the tools itself: TGI appends only its tool prompt, no tools JSON.
    messages = [dict(m) for m in ASK]
    messages[-1]["content"] += "\n---\n" + (tool_prompt or DEFAULT_TOOL_PROMPT)
    assert text == jinja_render(model[1], messages, offered)
    assert "<tools>\n" + json.dumps(offered[0], ensure_ascii=False) in text
    assert json.dumps(offered, separators=(",", ":")) not in text
    assert ("no_tool" in text) == (choice == "auto")
    # Without tools (or with tool_choice none) the template's plain branch.
    plain = jinja_render(model[1], ASK, None)
    assert templated_text(server) == plain
    assert templated_text(server, tools=TOOLS, tool_choice="none") == plain
    assert "<tools>" not in plain


def test_parallel_calls_prompt_says_how_to_make_several(server, model):
    text = templated_text(server, tools=TOOLS, tool_choice="required", parallel_tool_calls=True)
    messages = [dict(m) for m in ASK]
    messages[-1]["content"] += ("\n---\n" + DEFAULT_TOOL_PROMPT + "To call several functions at "
                                "once, respond with a JSON array of such calls.\n")
    assert text == jinja_render(model[1], messages, template_tools(TOOLS, with_no_tool=False))


def check_call(call):
    assert call.type == "function"
    assert call.function.name in SCHEMAS, call.function.name
    jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])


def test_unconstrained_output_is_garbage(oai):
    out = oai.chat.completions.create(model="tgi", messages=ASK, tools=TOOLS, tool_choice="none",
                                      max_tokens=24, seed=1)
    text = out.choices[0].message.content
    assert text and out.choices[0].message.tool_calls is None
    with pytest.raises(ValueError):
        json.loads(text)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_constrained_output_is_a_valid_call(oai, seed):
    choice = oai.chat.completions.create(model="tgi", messages=ASK, tools=TOOLS,
                                         tool_choice="required", max_tokens=120,
                                         seed=seed).choices[0]
    assert choice.finish_reason == "tool_calls", choice
    assert choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.id == "0"
    check_call(call)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_parallel_calls_are_valid(oai, seed):
    choice = oai.chat.completions.create(model="tgi", messages=ASK, tools=TOOLS,
                                         tool_choice="required", max_tokens=300, seed=seed,
                                         parallel_tool_calls=True).choices[0]
    assert choice.finish_reason == "tool_calls", choice
    calls = choice.message.tool_calls
    assert 1 <= len(calls) <= 8
    assert [c.id for c in calls] == [str(i) for i in range(len(calls))]
    for call in calls:
        check_call(call)


def never_close_the_array():
    """logit_bias that opens an array ("[" +100) and never closes one early (every token holding
    "]" -100): only the grammar's bound then ends the answer."""
    vocab = json.loads((SMOLLM2_TOKENIZER / "tokenizer.json").read_text())["model"]["vocab"]
    bias = {str(i): -100 for token, i in vocab.items() if "]" in token}
    bias[str(vocab["["])] = 100
    return bias


def test_parallel_calls_stop_at_the_bound_and_stream_the_same(oai):
    kw = dict(model="tgi", messages=ASK, tools=TOOLS, tool_choice="required", max_tokens=600,
              seed=5, parallel_tool_calls=True, logit_bias=never_close_the_array())
    choice = oai.chat.completions.create(**kw).choices[0]
    assert choice.finish_reason == "tool_calls", choice
    calls = choice.message.tool_calls
    assert [c.id for c in calls] == [str(i) for i in range(8)]  # kMaxParallelToolCalls
    for call in calls:
        check_call(call)
    expected = [(c.id, c.function.name, json.loads(c.function.arguments)) for c in calls]
    # Streamed: deltas accumulated by index (the openai client's helper) give the same calls,
    # each call's deltas before the next call's.
    order = []
    with oai.chat.completions.stream(**kw) as stream:
        for event in stream:
            if event.type == "chunk" and event.chunk.choices:
                order += [tc.index for tc in event.chunk.choices[0].delta.tool_calls or []]
        final = stream.get_final_completion().choices[0]
    assert final.finish_reason == "tool_calls"
    assert [(c.id, c.function.name, json.loads(c.function.arguments))
            for c in final.message.tool_calls] == expected
    assert order == sorted(order) and set(order) == set(range(8))
