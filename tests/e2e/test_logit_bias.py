"""OpenAI's logit_bias on both OpenAI routes, through the real `openai` client: a bias moves the
raw logits of its token ids before every processor; ids outside the vocabulary and biases outside
[-100, 100] are 422 before generation (TGI accepts the field and ignores it)."""
import openai
import pytest
from openai import OpenAI


@pytest.fixture(scope="module")
def client(server):
    return OpenAI(base_url=server.url + "/v1", api_key="-", max_retries=0, timeout=60)


MESSAGES = [{"role": "user", "content": "Name a colour."}]


def tokens_of(choice):
    return [t.token for t in choice.logprobs.content]


def test_a_large_bias_forces_a_token_and_a_negative_one_bans_it(client, server):
    plain = client.chat.completions.create(model="tgi", messages=MESSAGES, max_tokens=4,
                                           temperature=0, logprobs=True)
    first = plain.choices[0].logprobs.content[0].token
    first_id = server.post("/tokenize", {"inputs": first}).json()[0]["id"]
    banned = client.chat.completions.create(model="tgi", messages=MESSAGES, max_tokens=4,
                                            temperature=0, logprobs=True,
                                            logit_bias={str(first_id): -100})
    assert tokens_of(banned.choices[0])[0] != first
    forced_id = server.post("/tokenize", {"inputs": " blue"}).json()[-1]["id"]
    forced = client.completions.create(model="tgi", prompt="My favourite", max_tokens=3,
                                       temperature=0, logit_bias={str(forced_id): 100})
    assert forced.choices[0].text == " blue" * 3


@pytest.mark.parametrize("bias", [{"99999999": 1}, {"5": 100.5}, {"x": 1}])
def test_invalid_biases_are_422(client, bias):
    with pytest.raises(openai.UnprocessableEntityError):
        client.chat.completions.create(model="tgi", messages=MESSAGES, max_tokens=2,
                                       logit_bias=bias)
