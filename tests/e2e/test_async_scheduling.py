"""vLLM's --async-scheduling / --no-async-scheduling through the official openai client: on by default
with vLLM's start-up line, and a server with it answers exactly as one without it -- greedy and
seeded completions, stop strings that end a request while its next step runs, n > 1 with logprobs,
streaming, usage (docs/ARCHITECTURE.md "The engine loop")."""
import concurrent.futures

import openai
import pytest

MODEL = "fp4serve-demo"


@pytest.fixture(scope="module")
def pair(server, make_server):
    """The session's default server (async scheduling on by default) and one with it off."""
    return server, make_server("--no-async-scheduling")


def client_of(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused")


def test_default_is_on_and_the_flag_turns_it_off_with_vllms_log_lines(pair):
    on, off = pair
    assert "Asynchronous scheduling is enabled." in on.read_log()
    assert "Asynchronous scheduling is disabled." in off.read_log()
    assert "Asynchronous scheduling is enabled." not in off.read_log()


def requests_for(stop_text):
    base = {"model": MODEL, "max_tokens": 16, "logprobs": 2}
    return [
        dict(base, prompt="The quick brown fox", temperature=0),
        dict(base, prompt="The quick brown fox", temperature=0, stop=[stop_text]),
        dict(base, prompt="Once upon a time", temperature=0.9, seed=7, n=2),
        dict(base, prompt="Lists of numbers: 1, 2, 3", temperature=0.7, seed=3, presence_penalty=0.5,
             frequency_penalty=0.3),
        dict(base, prompt="Hello", temperature=0, max_tokens=5),
    ]


def answer(server, body):
    r = client_of(server).completions.create(**body)
    return [(c.index, c.text, c.finish_reason, c.logprobs.tokens, c.logprobs.token_logprobs) for c in r.choices], \
        (r.usage.prompt_tokens, r.usage.completion_tokens)


def streamed(server, body):
    chunks = client_of(server).completions.create(stream=True, **body)
    text, finish = "", None
    for c in chunks:
        if c.choices:
            text += c.choices[0].text
            finish = c.choices[0].finish_reason or finish
    return text, finish


def test_async_answers_exactly_as_sync(pair):
    on, off = pair
    # A stop string from the middle of the greedy output: it ends the request while its next step runs.
    full = client_of(off).completions.create(model=MODEL, prompt="The quick brown fox", max_tokens=16, temperature=0)
    text = full.choices[0].text
    assert len(text) > 8
    stop_text = text[len(text) // 2:len(text) // 2 + 2]
    bodies = requests_for(stop_text)
    for server in (on, off):
        # Concurrent, so the requests share steps; the outputs must not depend on it.
        with concurrent.futures.ThreadPoolExecutor(len(bodies)) as pool:
            server.results = list(pool.map(lambda b, s=server: answer(s, b), bodies))
    for body, a, s in zip(bodies, on.results, off.results):
        assert a == s, body
    stopped = on.results[1][0][0]
    assert stopped[2] == "stop" and stopped[1] == text[:text.find(stop_text)]
    body = dict(bodies[1])
    body.pop("logprobs")
    assert streamed(on, body) == streamed(off, body) == (text[:text.find(stop_text)], "stop")
