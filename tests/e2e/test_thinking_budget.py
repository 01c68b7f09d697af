"""thinking_token_budget end to end on the trained canary model (tests/data/models/canary, the same
assembly as test_canary_model.py): after the budget the server forces "</think>", the model goes on
with its answer, and the qwen3 reasoning parser splits reasoning from content -- streamed and not.
The canary reasons for about fifteen tokens when left alone, so small budgets cut it short.

Counting follows vLLM: the tokens already inside the open think block of the prompt count, and a
Qwen3.6 prompt ends "<think>\\n", so a budget of B leaves B - 1 reasoning tokens in the output."""

import openai
import pytest
import requests

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
THINKING = {"chat_template_kwargs": {"enable_thinking": True}}


@pytest.fixture(scope="module")
def canary(make_server, canary_model_dir):
    model = canary_model_dir("bf16")
    return make_server("--model", str(model), "--reasoning-parser", "qwen3")


@pytest.fixture(scope="module")
def client(canary):
    return openai.OpenAI(base_url=canary.url + "/v1", api_key="unused")


@pytest.fixture(scope="module")
def end_think(canary):
    r = requests.post(canary.url + "/tokenize", json={"prompt": "</think>", "add_special_tokens": False}, timeout=30)
    ids = r.json()["tokens"]
    assert len(ids) == 1, ids
    return ids[0]


def decode(canary, ids):
    """The text of `ids` as the response shows it: special tokens (the closing <|im_end|>) left out."""
    r = requests.post(canary.url + "/tokenize", json={"prompt": "<|im_end|>", "add_special_tokens": False}, timeout=30)
    ids = [i for i in ids if i not in r.json()["tokens"]]
    if not ids:
        return ""
    return requests.post(canary.url + "/detokenize", json={"tokens": ids}, timeout=30).json()["prompt"]


def ask(client, budget, stream=False):
    """The answer as (token ids, reasoning, content), from one response or from the stream's chunks."""
    body = {"return_token_ids": True, **THINKING}
    if budget is not None:
        body["thinking_token_budget"] = budget
    kwargs = dict(model=client.models.list().data[0].id, messages=QUESTION, temperature=0, max_tokens=64,
                  extra_body=body)
    if not stream:
        choice = client.chat.completions.create(**kwargs).choices[0]
        assert choice.finish_reason == "stop", choice
        return choice.token_ids, choice.message.reasoning_content or "", choice.message.content or ""
    ids, reasoning, content, finish = [], "", "", None
    for chunk in client.chat.completions.create(stream=True, **kwargs):
        for c in chunk.choices:
            ids += getattr(c, "token_ids", None) or []
            reasoning += getattr(c.delta, "reasoning_content", None) or ""
            content += c.delta.content or ""
            finish = c.finish_reason or finish
    assert finish == "stop"
    return ids, reasoning, content


def test_unbounded_reasoning_is_longer_than_the_budgets_tried(client, end_think):
    ids, reasoning, content = ask(client, None)
    assert ids.index(end_think) >= 10, "the canary thinks for a while when left alone"
    assert "Paris" in reasoning and "Paris" in content
    # A budget the reasoning never reaches changes nothing.
    assert ask(client, 60) == (ids, reasoning, content)


@pytest.mark.parametrize("budget", [1, 4, 7])
@pytest.mark.parametrize("stream", [False, True])
def test_budget_forces_the_end_of_reasoning_then_an_answer(client, canary, end_think, budget, stream):
    ids, reasoning, content = ask(client, budget, stream)
    cut = ids.index(end_think)
    assert cut == budget - 1, (budget, cut, decode(canary, ids))
    assert cut <= budget
    # The qwen3 parser splits at the forced marker: reasoning is exactly what came before it ...
    assert reasoning == decode(canary, ids[:cut])
    # ... and an answer follows it.
    assert content.strip(), decode(canary, ids)
    assert content == decode(canary, ids[cut + 1:])


def test_zero_budget_skips_reasoning(client, end_think):
    for stream in (False, True):
        ids, reasoning, content = ask(client, 0, stream)
        assert ids[0] == end_think
        assert reasoning == ""
        assert content.strip()


def test_streamed_and_not_streamed_agree(client):
    assert ask(client, 4, stream=False) == ask(client, 4, stream=True)
