"""The official openai client against fp4serve: completions and chat, streamed and not, usage,
logprobs, n, seeds, reasoning, tools."""
import openai
import pytest

MODEL = "fp4serve-demo"


def test_models_lists_the_served_name_with_root_and_max_model_len(client, server):
    models = client.models.list()
    assert [m.id for m in models.data] == [MODEL]
    card = models.data[0].model_dump()
    assert card["max_model_len"] == 2048
    assert card["root"].endswith("demo-model")


def test_completion_not_streamed_reports_usage_that_matches_the_tokens(client):
    r = client.completions.create(model=MODEL, prompt="The capital of France is", max_tokens=7,
                                  temperature=0, logprobs=2)
    c = r.choices[0]
    assert c.finish_reason == "length"
    assert r.usage.completion_tokens == 7
    assert r.usage.prompt_tokens == 5
    assert r.usage.total_tokens == 12
    assert len(c.logprobs.tokens) == 7
    assert all(len(t) >= 1 for t in c.logprobs.top_logprobs)
    assert "".join(c.logprobs.tokens) == c.text


def test_completion_streamed_one_chunk_per_token_and_usage(client):
    stream = client.completions.create(model=MODEL, prompt="Hello", max_tokens=9, temperature=0, stream=True,
                                       stream_options={"include_usage": True})
    chunks = list(stream)
    text_chunks = [c for c in chunks if c.choices]
    usage = chunks[-1].usage
    assert usage.completion_tokens == 9
    assert len(text_chunks) == 9
    assert text_chunks[-1].choices[0].finish_reason == "length"
    full = client.completions.create(model=MODEL, prompt="Hello", max_tokens=9, temperature=0)
    assert "".join(c.choices[0].text for c in text_chunks) == full.choices[0].text


def test_greedy_and_seeded_requests_are_reproducible(client):
    a = client.completions.create(model=MODEL, prompt="Once upon", max_tokens=12, temperature=0)
    b = client.completions.create(model=MODEL, prompt="Once upon", max_tokens=12, temperature=0)
    assert a.choices[0].text == b.choices[0].text
    s1 = client.completions.create(model=MODEL, prompt="Once upon", max_tokens=12, temperature=1.0, seed=7)
    s2 = client.completions.create(model=MODEL, prompt="Once upon", max_tokens=12, temperature=1.0, seed=7)
    assert s1.choices[0].text == s2.choices[0].text


def test_n_returns_indexed_choices(client):
    r = client.completions.create(model=MODEL, prompt="A list:", max_tokens=5, n=3, temperature=1.0, seed=3)
    assert sorted(c.index for c in r.choices) == [0, 1, 2]
    assert r.usage.completion_tokens == 15


def test_stop_string_ends_the_text(client):
    full = client.completions.create(model=MODEL, prompt="Numbers:", max_tokens=16, temperature=0).choices[0].text
    assert len(full) > 4
    stop = full[2:4]
    r = client.completions.create(model=MODEL, prompt="Numbers:", max_tokens=16, temperature=0, stop=[stop])
    c = r.choices[0]
    assert c.finish_reason == "stop"
    assert c.model_dump()["stop_reason"] == stop
    assert c.text == full[: full.find(stop)]


def test_chat_with_thinking_puts_the_output_in_reasoning(client):
    r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=6,
                                       temperature=0, extra_body={"chat_template_kwargs": {"enable_thinking": True}})
    m = thinking = r.choices[0].message.model_dump()
    # With enable_thinking the template opens <think> in the prompt; a random model never closes it.
    assert m["reasoning"] and m["content"] is None
    assert m["reasoning_content"] == m["reasoning"]
    assert r.usage.completion_tokens == 6
    # The template's default closes an empty think block in the prompt: everything is content.
    r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=6,
                                       temperature=0)
    m = r.choices[0].message.model_dump()
    assert m["content"] and m["reasoning"] is None
    stream = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=6,
                                            temperature=0, stream=True,
                                            extra_body={"chat_template_kwargs": {"enable_thinking": True}})
    reasoning = "".join(getattr(c.choices[0].delta, "reasoning", None) or "" for c in stream if c.choices)
    assert reasoning == thinking["reasoning"]


def test_chat_without_thinking_is_content_and_streams_per_token(client):
    kwargs = dict(model=MODEL, messages=[{"role": "system", "content": "Be brief."},
                                         {"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
                  max_completion_tokens=8, temperature=0, extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    whole = client.chat.completions.create(**kwargs)
    assert whole.choices[0].message.content
    stream = client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kwargs)
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == whole.choices[0].message.content
    assert chunks[-1].usage.completion_tokens == 8
    assert chunks[-2].choices[0].finish_reason == "length"


def test_chat_logprobs(client):
    r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=4,
                                       logprobs=True, top_logprobs=3, temperature=0,
                                       extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    lp = r.choices[0].logprobs.content
    assert len(lp) == 4
    assert all(len(t.top_logprobs) == 3 for t in lp)
    assert lp[0].logprob <= 0


def test_tools_request_is_accepted_and_finishes_normally(client):
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                                                "parameters": {"type": "object",
                                                               "properties": {"city": {"type": "string"}},
                                                               "required": ["city"]}}}]
    r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Weather in Paris?"}],
                                       tools=tools, max_tokens=5, temperature=0,
                                       extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    # A random model writes no <tool_call> markup: plain content, finish "length" (the parsers'
    # own tests cover the markup; the canary model of issue 7 covers it end to end).
    assert r.choices[0].finish_reason == "length"
    assert r.choices[0].message.tool_calls in (None, [])


def test_unknown_model_is_a_404_in_the_openai_shape(client):
    with pytest.raises(openai.NotFoundError) as e:
        client.completions.create(model="nope", prompt="x", max_tokens=1)
    assert e.value.body["type"] == "NotFoundError"
