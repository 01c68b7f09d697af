"""n > 1 over the official openai client: the prompt is prefilled once and forked to the children
(docs/ARCHITECTURE.md, "n > 1"), each choice equals a single request seeded with seed + index (how
fp4serve and vLLM derive child seeds), and /metrics shows one prompt of local compute, the other
children's prompt tokens as local cache hits. The same for separate requests with one prompt that
arrive together (engine/prompt_twins.h)."""
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import requests

MODEL = "fp4serve-demo"


def prompt_tokens_by_source(server):
    out = {}
    for line in requests.get(server.url + "/metrics", timeout=10).text.splitlines():
        if line.startswith("vllm:prompt_tokens_by_source_total{"):
            source = line.split('source="', 1)[1].split('"', 1)[0]
            out[source] = out.get(source, 0.0) + float(line.rsplit(" ", 1)[1])
    assert "local_compute" in out and "local_cache_hit" in out, out
    return out


def test_n3_choices_equal_single_requests_seeded_seed_plus_index_and_the_prompt_is_computed_once(client, server):
    # A prompt no earlier request started with: child 0 cannot hit the prefix cache.
    prompt = f"{uuid.uuid4().hex} is a name; tell a long story about it, with many details:"
    before = prompt_tokens_by_source(server)
    r = client.completions.create(model=MODEL, prompt=prompt, max_tokens=12, n=3, temperature=1.0, seed=11,
                                  logprobs=1)
    after = prompt_tokens_by_source(server)
    assert sorted(c.index for c in r.choices) == [0, 1, 2]
    prompt_len = r.usage.prompt_tokens
    assert after["local_compute"] - before["local_compute"] == prompt_len
    assert after["local_cache_hit"] - before["local_cache_hit"] == 2 * prompt_len
    by_index = {c.index: c for c in r.choices}
    for i in range(3):
        single = client.completions.create(model=MODEL, prompt=prompt, max_tokens=12, temperature=1.0, seed=11 + i,
                                           logprobs=1).choices[0]
        assert by_index[i].text == single.text, i
        assert by_index[i].logprobs.tokens == single.logprobs.tokens, i
        assert by_index[i].logprobs.token_logprobs == single.logprobs.token_logprobs, i
    assert len({c.text for c in r.choices}) > 1  # the seeds differ, so (almost surely) do the texts


def test_n4_streamed_chat_choices_equal_single_requests(client):
    messages = [{"role": "user", "content": f"{uuid.uuid4().hex}: say something"}]
    kwargs = dict(model=MODEL, messages=messages, max_tokens=10, temperature=0.8, seed=5,
                  extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    texts = {}
    for chunk in client.chat.completions.create(n=4, stream=True, **kwargs):
        for c in chunk.choices:
            texts[c.index] = texts.get(c.index, "") + (c.delta.content or "")
    assert sorted(texts) == [0, 1, 2, 3]
    for i in range(4):
        single = client.chat.completions.create(**{**kwargs, "seed": 5 + i}).choices[0].message.content or ""
        assert texts[i] == single, i


def test_identical_concurrent_prompts_from_separate_requests_are_prefilled_once(make_server):
    # The engine is held while four clients send one prompt with their own seeds, so all four are
    # queued before its next step: the first computes the prompt, the other three fork from it. Its
    # own server, whose stall timeout is far above the hold (past it, the engine process counts as
    # wedged and is restarted).
    import openai
    server = make_server("--enable-debug-endpoints", "--health-stall-timeout", "60")
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused")
    prompt = f"{uuid.uuid4().hex} and {uuid.uuid4().hex} walk into a bar; the story goes on:"
    kwargs = dict(model=MODEL, prompt=prompt, max_tokens=8, temperature=1.0, logprobs=1)
    before = prompt_tokens_by_source(server)
    assert requests.post(server.url + "/debug/stall?on=1", timeout=10).status_code == 200
    try:
        with ThreadPoolExecutor(4) as pool:
            futures = [pool.submit(client.completions.create, seed=40 + i, **kwargs) for i in range(4)]
            time.sleep(1.0)  # the four requests reach the engine's inbox
            assert requests.post(server.url + "/debug/stall?on=0", timeout=10).status_code == 200
            answers = [f.result(timeout=120).choices[0] for f in futures]
    finally:
        requests.post(server.url + "/debug/stall?on=0", timeout=10)
    after = prompt_tokens_by_source(server)
    prompt_len = client.completions.create(model=MODEL, prompt=prompt, max_tokens=1).usage.prompt_tokens
    assert after["local_compute"] - before["local_compute"] == prompt_len
    assert after["local_cache_hit"] - before["local_cache_hit"] == 3 * prompt_len
    for i, answer in enumerate(answers):
        single = client.completions.create(seed=40 + i, **kwargs).choices[0]
        assert answer.logprobs.tokens == single.logprobs.tokens, i
        assert answer.logprobs.token_logprobs == single.logprobs.token_logprobs, i
