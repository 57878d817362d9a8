"""Where a model folder's chat template comes from, as transformers takes it: a named list in
tokenizer_config.json gives `default` for chat and `tool_use` for requests with tools
(apply_chat_template's choice); chat_template.json (`{"chat_template": ...}`, what newer Hub
repositories ship, read by transformers' processors over the tokenizer's) replaces the config's.
The prompts are checked against Python jinja2's rendering of the same template (/chat_tokenize).
"""

import json

import jinja2
import pytest
import requests

from conftest import launch_server
from tiny_random_model import SMOLLM2_TOKENIZER, write_model

DEFAULT = "D|{% for m in messages %}{{ m['role'] }}:{{ m['content'] }};{% endfor %}"
TOOL_USE = ("T|{% for t in tools %}{{ t['function']['name'] }},{% endfor %}|"
            "{% for m in messages %}{{ m['role'] }}:{{ m['content'] }};{% endfor %}")
FROM_JSON = "J|{% for m in messages %}{{ m['content'] }};{% endfor %}"
ASK = [{"role": "user", "content": "Weather in Paris?"}]
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "parameters": {"type": "object", "properties": {}}}}]


def render(template, **kw) -> str:
    return jinja2.Environment().from_string(template).render(**kw)


def templated_text(server, **body) -> str:
    r = requests.post(server.url + "/chat_tokenize", json={"messages": ASK, **body}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()["templated_text"]


@pytest.fixture(scope="module")
def named_model(tmp_path_factory):
    if not (SMOLLM2_TOKENIZER / "tokenizer.json").exists():
        pytest.fail(f"{SMOLLM2_TOKENIZER} missing: run `make fixtures-test`")
    folder = tmp_path_factory.mktemp("named-templates")
    write_model(folder, [{"name": "tool_use", "template": TOOL_USE},
                         {"name": "default", "template": DEFAULT}])
    return folder


def test_named_templates_default_for_chat_tool_use_with_tools(named_model):
    with launch_server(["--model-id", str(named_model)], use_flags_for_port=False) as server:
        assert templated_text(server) == render(DEFAULT, messages=ASK)
        with_tools = templated_text(server, tools=TOOLS, tool_choice="required")
        assert with_tools.startswith("T|get_weather,|user:Weather in Paris?\n---\n"), with_tools
        # tool_choice none sends no tools: the default template.
        assert templated_text(server, tools=TOOLS, tool_choice="none") == render(DEFAULT,
                                                                               messages=ASK)


def test_chat_template_json_replaces_the_tokenizer_configs(named_model, tmp_path):
    folder = tmp_path / "with-json"
    folder.mkdir()
    write_model(folder, DEFAULT)
    (folder / "chat_template.json").write_text(json.dumps({"chat_template": FROM_JSON}))
    with launch_server(["--model-id", str(folder)], use_flags_for_port=False) as server:
        assert templated_text(server) == render(FROM_JSON, messages=ASK)
