"""Tool calling on /v1/chat/completions (spec tgi-api.md §7.3) with the real `openai` client and
huggingface_hub on the default model: tool_choice required / named / auto / none, plain and
streamed. The model is tiny and may choose poorly, but the grammar guarantees the shape: every
call must name one of the offered tools and its arguments must validate against that tool's
parameters; a stream must rebuild the same call."""

import json
import re

import jsonschema
import pytest
import requests
from huggingface_hub import InferenceClient
from openai import OpenAI, UnprocessableEntityError

from conftest import launch_server

WEATHER = {
    "type": "object",
    "properties": {
        "location": {"type": "string", "maxLength": 24},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    },
    "required": ["location", "unit"],
}
TIME = {
    "type": "object",
    "properties": {"timezone": {"type": "string", "maxLength": 24}},
    "required": ["timezone"],
}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Current weather",
                                      "parameters": WEATHER}},
    {"type": "function", "function": {"name": "get_time", "description": "Current time",
                                      "parameters": TIME}},
]
SCHEMAS = {"get_weather": WEATHER, "get_time": TIME}
ASK = [{"role": "user", "content": "What is the weather like in Paris, in celsius?"}]


@pytest.fixture(scope="module")
def server():
    """Its own server: the tools' JSON and TGI's tool prompt take more than the shared server's
    256 input tokens."""
    env = {"MAX_INPUT_TOKENS": "1536", "MAX_TOTAL_TOKENS": "2048"}
    with launch_server(env=env, use_flags_for_port=False) as s:
        yield s


@pytest.fixture(scope="module")
def oai(server):
    return OpenAI(base_url=server.url + "/v1", api_key="-", max_retries=0, timeout=120)


def check_call(name, arguments, allowed=SCHEMAS):
    assert name in allowed, name
    args = json.loads(arguments)
    jsonschema.validate(args, allowed[name])
    return args


def chat(oai, **kw):
    kw.setdefault("max_tokens", 80)
    kw.setdefault("messages", ASK)
    return oai.chat.completions.create(model="tgi", tools=TOOLS, **kw)


@pytest.mark.parametrize("seed", [None, 1, 2])
def test_required_gives_a_valid_call(oai, seed):
    kw = {"temperature": 0} if seed is None else {"seed": seed}
    choice = chat(oai, tool_choice="required", **kw).choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    assert choice.message.role == "assistant"
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.id
    check_call(call.function.name, call.function.arguments)


@pytest.mark.parametrize("name", ["get_weather", "get_time"])
def test_named_choice_calls_that_tool(oai, name):
    choice = chat(oai, temperature=0,
                  tool_choice={"type": "function", "function": {"name": name}}).choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    assert call.function.name == name
    check_call(name, call.function.arguments, {name: SCHEMAS[name]})


def test_named_choice_as_a_plain_string_is_tgis(server):
    r = server.post("/v1/chat/completions", {"messages": ASK, "tools": TOOLS,
                                             "tool_choice": "get_time", "max_tokens": 80})
    assert r.status_code == 200, r.text
    message = r.json()["choices"][0]["message"]
    assert message["content"] is None
    assert message["tool_calls"][0]["function"]["name"] == "get_time"
    assert message["tool_calls"][0]["function"]["description"] is None  # TGI's extra key
    check_call("get_time", message["tool_calls"][0]["function"]["arguments"])


def test_none_is_plain_text(oai):
    choice = chat(oai, temperature=0, max_tokens=16, tool_choice="none").choices[0]
    assert choice.message.tool_calls is None
    assert choice.message.content
    assert choice.finish_reason in ("stop", "length")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_auto_is_a_call_or_text(oai, seed):
    choice = chat(oai, seed=seed, max_tokens=120).choices[0]
    if choice.message.tool_calls:
        assert choice.finish_reason == "tool_calls"
        assert choice.message.content is None
        (call,) = choice.message.tool_calls
        check_call(call.function.name, call.function.arguments)
    else:
        assert choice.message.content is not None
        assert not choice.message.content.startswith('{"function"'), choice.message.content


def rebuild(chunks):
    """The accumulation an openai-client user does: name and arguments per tool-call index."""
    calls, content, finish = {}, "", None
    for chunk in chunks:
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        delta = choice.delta
        content += delta.content or ""
        for tc in delta.tool_calls or []:
            call = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
            if tc.id:
                call["id"] = tc.id
            if tc.function and tc.function.name:
                call["name"] += tc.function.name
            if tc.function and tc.function.arguments:
                call["arguments"] += tc.function.arguments
        if choice.finish_reason:
            assert finish is None, "one finish_reason per choice"
            finish = choice.finish_reason
    return calls, content, finish


def test_auto_covers_calls_and_no_tool_text(oai):
    # Over a few seeds of an off-topic prompt the model takes both branches of `auto`: a call
    # to an offered tool, and no_tool, whose content is the text answer (no call object leaks).
    # The stream of a text answer's seed carries the same text.
    hello = [{"role": "user", "content": "Say hello."}]
    calls, texts = 0, {}
    for seed in range(1, 9):
        choice = chat(oai, seed=seed, messages=hello).choices[0]
        if choice.message.tool_calls:
            calls += 1
            check_call(choice.message.tool_calls[0].function.name,
                       choice.message.tool_calls[0].function.arguments)
        else:
            assert choice.finish_reason == "stop"
            assert "_name" not in choice.message.content
            texts[seed] = choice.message.content
    assert calls and texts, (calls, texts)
    seed, text = max(texts.items(), key=lambda t: len(t[1]))
    chunks = list(chat(oai, seed=seed, messages=hello, stream=True))
    streamed_calls, content, finish = rebuild(chunks)
    assert streamed_calls == {} and content == text and finish == "stop"
    if len(text) > 12:  # streamed as generated, not in one piece at the end
        assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) > 2


def test_tool_prompt_is_accepted(oai):
    choice = chat(oai, seed=3, tool_choice="required",
                  extra_body={"tool_prompt": "Answer with a call."}).choices[0]
    check_call(choice.message.tool_calls[0].function.name,
               choice.message.tool_calls[0].function.arguments)


@pytest.mark.parametrize("choice", ["required",
                                    {"type": "function", "function": {"name": "get_weather"}}])
def test_stream_rebuilds_the_same_call(oai, choice):
    plain = chat(oai, temperature=0, tool_choice=choice).choices[0].message.tool_calls[0]
    chunks = list(chat(oai, temperature=0, tool_choice=choice, stream=True,
                       stream_options={"include_usage": True}))
    calls, content, finish = rebuild(chunks)
    assert finish == "tool_calls"
    assert content == ""
    assert list(calls) == [0]
    assert calls[0]["id"] and calls[0]["name"] == plain.function.name
    assert json.loads(calls[0]["arguments"]) == json.loads(plain.function.arguments)
    check_call(calls[0]["name"], calls[0]["arguments"])
    assert len([c for c in chunks if c.choices]) > 3  # streamed as generated, not at the end
    assert chunks[-1].usage and chunks[-1].usage.completion_tokens > 0


def test_stream_none_is_text(oai):
    calls, content, finish = rebuild(chat(oai, temperature=0, max_tokens=12, tool_choice="none",
                                          stream=True))
    assert calls == {} and content and finish in ("stop", "length")


@pytest.mark.parametrize("seed", [1, 2])
def test_stream_auto_is_a_call_or_text(oai, seed):
    calls, content, finish = rebuild(chat(oai, seed=seed, max_tokens=120, stream=True))
    if calls:
        assert finish == "tool_calls" and content == ""
        check_call(calls[0]["name"], calls[0]["arguments"])
    else:
        assert finish in ("stop", "length")
        assert not content.startswith('{"function"')


# ---- parallel_tool_calls (OpenAI's; TGI ignores it) --------------------------------------------

TWO_CITIES = [{"role": "user", "content": "What is the weather in Paris and in Rome? Call "
                                          "get_weather once per city, in one JSON array."}]


def check_parallel(calls):
    assert 1 <= len(calls) <= 8
    assert [c.id for c in calls] == [str(i) for i in range(len(calls))]  # TGI's "0", then "1"...
    for call in calls:
        assert call.type == "function"
        check_call(call.function.name, call.function.arguments)


def test_parallel_calls_over_seeds(oai):
    # Each answer is 1..8 valid calls; the model asked for two cities makes several at least once.
    sizes = []
    for seed in range(1, 7):
        choice = chat(oai, seed=seed, tool_choice="required", parallel_tool_calls=True,
                      messages=TWO_CITIES, max_tokens=400).choices[0]
        assert choice.finish_reason == "tool_calls", choice
        assert choice.message.content is None
        check_parallel(choice.message.tool_calls)
        sizes.append(len(choice.message.tool_calls))
    assert max(sizes) >= 2, sizes


def first_array_seed(oai, **kw):
    for seed in range(1, 13):
        message = chat(oai, seed=seed, parallel_tool_calls=True, messages=TWO_CITIES,
                       max_tokens=400, **kw).choices[0].message
        if message.tool_calls and len(message.tool_calls) >= 2:
            return seed, message
    pytest.fail("no seed gave several calls")


def test_parallel_auto_is_calls_or_text_never_both(oai):
    seed, message = first_array_seed(oai)  # auto: no_tool is offered but never inside an array
    check_parallel(message.tool_calls)
    assert "no_tool" not in [c.function.name for c in message.tool_calls]
    for seed in range(1, 5):
        choice = chat(oai, seed=seed, parallel_tool_calls=True,
                      messages=[{"role": "user", "content": "Say hello."}]).choices[0]
        if choice.message.tool_calls:
            check_parallel(choice.message.tool_calls)
            assert choice.message.content is None
        else:
            assert choice.finish_reason in ("stop", "length")
            assert not choice.message.content.startswith('{"function"')


def test_parallel_stream_deltas_are_openais(oai):
    seed, message = first_array_seed(oai, tool_choice="required")
    chunks = list(chat(oai, seed=seed, tool_choice="required", parallel_tool_calls=True,
                       messages=TWO_CITIES, max_tokens=400, stream=True))
    calls, content, finish = rebuild(chunks)
    assert finish == "tool_calls" and content == ""
    assert list(calls) == list(range(len(message.tool_calls)))
    for i, call in enumerate(message.tool_calls):
        assert calls[i]["id"] == call.id == str(i)
        assert calls[i]["name"] == call.function.name
        assert json.loads(calls[i]["arguments"]) == json.loads(call.function.arguments)
    # OpenAI's shape: a call's first delta carries index, id, type and name; later ones only
    # index and arguments; calls come one after the other.
    seen, order = set(), []
    for chunk in chunks:
        for tc in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            order.append(tc.index)
            if tc.index not in seen:
                seen.add(tc.index)
                assert tc.id == str(tc.index) and tc.type == "function" and tc.function.name
            else:
                assert tc.id is None and tc.type is None and tc.function.name is None
    assert order == sorted(order)


def test_parallel_stream_with_the_openai_stream_helper(oai):
    seed, message = first_array_seed(oai, tool_choice="required")
    with oai.chat.completions.stream(model="tgi", messages=TWO_CITIES, tools=TOOLS, seed=seed,
                                     tool_choice="required", parallel_tool_calls=True,
                                     max_tokens=400) as stream:
        done = [e for e in stream if e.type == "tool_calls.function.arguments.done"]
        final = stream.get_final_completion()
    assert [e.index for e in done] == list(range(len(message.tool_calls)))
    assert [e.name for e in done] == [c.function.name for c in message.tool_calls]
    calls = final.choices[0].message.tool_calls
    assert final.choices[0].finish_reason == "tool_calls"
    assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        (c.id, c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls]


@pytest.mark.parametrize("stream", [False, True])
def test_without_parallel_true_the_answer_is_tgis(server, stream):
    # Absent (TGI's clients), false, or true with a named tool: byte for byte the single-call
    # answer (timestamps aside), never an array.
    def answer(**extra):
        body = {"messages": TWO_CITIES, "tools": TOOLS, "seed": 3, "max_tokens": 120,
                "stream": stream, **extra}
        r = server.post("/v1/chat/completions", body)
        assert r.status_code == 200, r.text
        return re.sub(r'"created":\d+', '"created":0', r.text)

    for choice in ["required", "auto"]:
        tgi = answer(tool_choice=choice)
        assert answer(tool_choice=choice, parallel_tool_calls=False) == tgi
        assert '"index":1' not in tgi and '"id":"1"' not in tgi
    named = {"type": "function", "function": {"name": "get_weather"}}
    assert answer(tool_choice=named, parallel_tool_calls=True) == answer(tool_choice=named)


def test_huggingface_hub_chat_completion_with_tools(server):
    client = InferenceClient(base_url=server.url)
    out = client.chat_completion(messages=ASK, tools=TOOLS, tool_choice="required",
                                 max_tokens=80, temperature=0)
    call = out.choices[0].message.tool_calls[0]
    arguments = call.function.arguments
    check_call(call.function.name,
               arguments if isinstance(arguments, str) else json.dumps(arguments))


def test_tools_reach_the_prompt(server):
    # SmolLM2's template does not render tools: TGI appends them and the tool prompt to the last
    # message.
    r = requests.post(server.url + "/chat_tokenize", json={
        "messages": ASK, "tools": TOOLS, "tool_prompt": "PICK ONE"}, timeout=30)
    assert r.status_code == 200, r.text
    text = r.json()["templated_text"]
    assert "\n---\n" in text and '"name":"get_weather"' in text and "PICK ONE" in text
    assert '"name":"no_tool"' in text  # auto offers the no-tool function
    r = requests.post(server.url + "/chat_tokenize", json={
        "messages": ASK, "tools": TOOLS, "tool_choice": "none"}, timeout=30)
    assert "get_weather" not in r.json()["templated_text"]


BAD = [
    ({"tools": [{"type": "function", "function": {"description": "no name"}}]}, None),
    ({"tools": TOOLS + TOOLS[:1]}, "Tool error: Tool name get_weather is used more than once"),
    ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}},
     "Tool error: Tool with name nope not found"),
    ({"tools": TOOLS, "tool_choice": "nope"}, "Tool error: Tool with name nope not found"),
    ({"tools": TOOLS, "response_format": {"type": "json_object"}},
     "Tool error: Grammar and tools are mutually exclusive"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "string"}}}]},
     None),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": "frobnicate"}}}}}]}, None),
]


@pytest.mark.parametrize("extra,message", BAD, ids=[str(i) for i in range(len(BAD))])
@pytest.mark.parametrize("stream", [False, True])
def test_bad_tools_are_422_before_generation(server, oai, extra, message, stream):
    r = server.post("/v1/chat/completions", {"messages": ASK, "stream": stream, **extra})
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    if message is not None:
        assert body["error"]["message"] == message
        assert body["error_type"] == "tool_error"
    if not stream:
        with pytest.raises(UnprocessableEntityError):
            oai.chat.completions.create(model="tgi", messages=ASK, **extra)
