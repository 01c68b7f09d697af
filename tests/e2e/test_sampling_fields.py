"""vLLM's per-request token filters and request-template fields through the official openai client
(extra_body), on the demo model (random weights: what is checked is which tokens may come out and
what the logprobs say, never what the text means): allowed_token_ids, logprob_token_ids, suffix,
per-request chat_template behind --trust-request-chat-template, and thinking_token_budget's 400s.
docs/vllm-surface.md §4 states the behaviours."""
import openai
import pytest
import requests

MODEL = "fp4serve-demo"
NO_THINKING = {"chat_template_kwargs": {"enable_thinking": False}}
UNTRUSTED = ("Chat template is passed with request, but --trust-request-chat-template is not set. "
             "Refused request with untrusted chat template.")


@pytest.fixture(scope="module")
def trusted(make_server):
    """Request templates trusted, reasoning parser on, every logprob allowed (for full-vocabulary
    references)."""
    return make_server("--reasoning-parser", "qwen3", "--trust-request-chat-template", "--max-logprobs", "-1")


@pytest.fixture(scope="module")
def plain(make_server):
    """vLLM's defaults: no reasoning parser, no trusted templates."""
    return make_server()


def client_of(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused")


def tokenize(server, text):
    r = requests.post(server.url + "/tokenize", json={"prompt": text, "add_special_tokens": False}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["tokens"]


def error_of(excinfo):
    return excinfo.value.response.json()["error"]


# --- allowed_token_ids -------------------------------------------------------------------------

def allowed_ids(server):
    return sorted(set(tokenize(server, " apple banana cherry plum")))


def test_allowed_token_ids_only_ever_produces_those_ids(trusted):
    client = client_of(trusted)
    allowed = allowed_ids(trusted)
    assert len(allowed) >= 4
    body = {"allowed_token_ids": allowed, "return_token_ids": True, **NO_THINKING}
    r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Name a fruit."}],
                                       max_tokens=24, temperature=1.0, seed=3, extra_body=body)
    ids = r.choices[0].token_ids
    assert len(ids) == 24, "none of the ids ends the output: it runs to max_tokens"
    assert set(ids) <= set(allowed)
    assert len(set(ids)) > 1, "a random model spreads over the allowed ids"
    assert r.choices[0].message.content == requests.post(trusted.url + "/detokenize", json={"tokens": ids},
                                                         timeout=30).json()["prompt"]
    # The same request without the filter leaves the set at once: the filter is what held it.
    free = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Name a fruit."}],
                                          max_tokens=24, temperature=1.0, seed=3,
                                          extra_body={"return_token_ids": True, **NO_THINKING})
    assert not set(free.choices[0].token_ids) <= set(allowed)


def test_allowed_token_ids_streamed_and_on_completions(trusted):
    client = client_of(trusted)
    allowed = allowed_ids(trusted)
    stream = client.completions.create(model=MODEL, prompt="My favourite fruit is", max_tokens=16, temperature=1.0,
                                       seed=11, stream=True, logprobs=0,
                                       extra_body={"allowed_token_ids": allowed, "return_tokens_as_token_ids": True})
    tokens = [t for chunk in stream for c in chunk.choices if c.logprobs for t in c.logprobs.tokens]
    assert len(tokens) == 16
    assert {int(t.removeprefix("token_id:")) for t in tokens} <= set(allowed)


def test_allowed_token_ids_refusals_are_vllms(trusted):
    client = client_of(trusted)
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=MODEL, prompt="x", max_tokens=2, extra_body={"allowed_token_ids": []})
    assert error_of(e) == {"message": "allowed_token_ids is not None and empty! (parameter=allowed_token_ids, value=[])",
                           "type": "BadRequestError", "param": "allowed_token_ids", "code": 400}
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=MODEL, prompt="x", max_tokens=2, extra_body={"allowed_token_ids": [5, 10**7]})
    assert error_of(e)["message"] == ("allowed_token_ids contains out-of-vocab token id! "
                                      "(parameter=allowed_token_ids, value=[10000000])")


# --- logprob_token_ids -------------------------------------------------------------------------

MESSAGES = [{"role": "user", "content": "Count to three."}]


def full_vocabulary_logprobs(server, max_tokens):
    """Per generated position, (sampled id, {token id: logprob} over the whole vocabulary), from
    chat's top_logprobs=-1. (Completions' logprobs=-1 lists no top entries at all: vLLM's
    `num_output_top_logprobs >= i` is never true for -1, and fp4serve answers the same.)"""
    r = requests.post(server.url + "/v1/chat/completions", timeout=300, json={
        "model": MODEL, "messages": MESSAGES, "max_tokens": max_tokens, "temperature": 0, "logprobs": True,
        "top_logprobs": -1, "return_tokens_as_token_ids": True, **NO_THINKING})
    assert r.status_code == 200, r.text
    as_id = lambda t: int(t.removeprefix("token_id:"))  # noqa: E731
    return [(as_id(p["token"]), {as_id(t["token"]): t["logprob"] for t in p["top_logprobs"]})
            for p in r.json()["choices"][0]["logprobs"]["content"]]


def test_logprob_token_ids_equal_the_full_logprobs_of_those_ids(trusted):
    client = client_of(trusted)
    reference = full_vocabulary_logprobs(trusted, 2)
    assert len(reference[0][1]) > 200000, "the whole vocabulary"
    ranked = sorted(reference[0][1], key=reference[0][1].get, reverse=True)
    named = [ranked[0], ranked[1000], ranked[-1], ranked[50], ranked[1000]]  # best, middling, worst, a repeat
    body = {"logprob_token_ids": named, "return_tokens_as_token_ids": True, **NO_THINKING}
    for stream in (False, True):
        kwargs = dict(model=MODEL, messages=MESSAGES, max_tokens=2, temperature=0, logprobs=True, extra_body=body)
        if stream:
            content = [p for chunk in client.chat.completions.create(stream=True, **kwargs) for c in chunk.choices
                       if c.logprobs for p in c.logprobs.content]
        else:
            content = client.chat.completions.create(**kwargs).choices[0].logprobs.content
        assert len(content) == 2
        for position, (sampled, full) in zip(content, reference):
            assert position.token == f"token_id:{sampled}"
            assert position.logprob == full[sampled]
            listed = [int(t.token.removeprefix("token_id:")) for t in position.top_logprobs]
            # vLLM's dict: the sampled token first, then the named ids in order, each once.
            assert listed == list(dict.fromkeys([sampled, *named])), stream
            for t in position.top_logprobs:
                assert t.logprob == full[int(t.token.removeprefix("token_id:"))], (stream, t)


def test_logprob_token_ids_on_completions(trusted):
    client = client_of(trusted)
    named = tokenize(trusted, " one two")
    r = client.completions.create(model=MODEL, prompt="Count: zero", max_tokens=3, temperature=0, logprobs=5,
                                  extra_body={"logprob_token_ids": named, "return_tokens_as_token_ids": True})
    lp = r.choices[0].logprobs
    for token, top in zip(lp.tokens, lp.top_logprobs):
        assert list(top) == list(dict.fromkeys([token, *(f"token_id:{i}" for i in named)]))
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=MODEL, prompt="x", max_tokens=1, logprobs=1,
                                  extra_body={"logprob_token_ids": [1, 10**7]})
    assert error_of(e)["message"] == ("token_id(s) [10000000] in logprob_token_ids contain out-of-vocab token ids. "
                                      "Vocabulary size: 248320 (parameter=logprob_token_ids, value=[10000000])")
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=MODEL, prompt="x", max_tokens=1, extra_body={"logprob_token_ids": [1]})
    assert "when using `logprob_token_ids`, `logprobs` must be set." in error_of(e)["message"]


# --- suffix ------------------------------------------------------------------------------------

def test_suffix_is_refused_with_vllms_400(trusted):
    with pytest.raises(openai.BadRequestError) as e:
        client_of(trusted).completions.create(model=MODEL, prompt="def add(a, b):\n", suffix="\n    return c",
                                              max_tokens=8)
    assert error_of(e) == {"message": "suffix is not currently supported", "type": "BadRequestError", "param": None,
                           "code": 400}


# --- per-request chat_template -----------------------------------------------------------------

TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\nTemplate-{{ marker | default('none') }}:{% endif %}")


def test_request_chat_template_needs_the_flag(server):
    # The session's default server runs without --trust-request-chat-template.
    client = client_of(server)
    for body in ({"chat_template": TEMPLATE}, {"chat_template_kwargs": {"chat_template": TEMPLATE}}):
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=2, extra_body=body)
        assert error_of(e) == {"message": UNTRUSTED, "type": "BadRequestError", "param": None, "code": 400}
    r = requests.post(server.url + "/tokenize", json={"messages": MESSAGES, "chat_template": TEMPLATE}, timeout=30)
    assert r.status_code == 400 and r.json()["error"]["message"] == UNTRUSTED


def test_request_chat_template_renders_the_prompt(trusted):
    client = client_of(trusted)
    body = {"messages": MESSAGES, "chat_template": TEMPLATE, "chat_template_kwargs": {"marker": "X7"}}
    tok = requests.post(trusted.url + "/tokenize", json=body, timeout=30).json()
    rendered = requests.post(trusted.url + "/detokenize", json={"tokens": tok["tokens"]}, timeout=30).json()["prompt"]
    assert rendered == "<|im_start|>user\nCount to three.<|im_end|>\n<|im_start|>assistant\nTemplate-X7:"
    r = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=3, temperature=0,
                                       extra_body={"chat_template": TEMPLATE, "chat_template_kwargs": {"marker": "X7"},
                                                   "return_token_ids": True})
    assert r.model_dump()["prompt_token_ids"] == tok["tokens"]
    assert r.usage.prompt_tokens == tok["count"]
    # Without the request's template the server's own renders something else.
    server_prompt = requests.post(trusted.url + "/tokenize", json={"messages": MESSAGES}, timeout=30).json()
    assert server_prompt["tokens"] != tok["tokens"]
    # "" means the server's template, as vLLM's `chat_template or default_template`.
    same = requests.post(trusted.url + "/tokenize", json={"messages": MESSAGES, "chat_template": ""}, timeout=30)
    assert same.json()["tokens"] == server_prompt["tokens"]


@pytest.mark.parametrize("template", [
    "{% for m in messages %}{{ m.content }",                            # syntax error
    "{{ raise_exception('This template accepts no users.') }}",         # the template refuses
    "{% for i in range(1000000) %}{% for j in range(1000000) %}x{% endfor %}{% endfor %}",  # a limit
    "{{ messages.nope.deeper }}",                                       # runtime error
])
def test_a_bad_request_template_is_a_400_and_the_server_lives_on(trusted, template):
    client = client_of(trusted)
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=2,
                                       extra_body={"chat_template": template})
    assert error_of(e)["type"] == "BadRequestError"
    assert requests.get(trusted.url + "/health", timeout=10).status_code == 200
    ok = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=2,
                                        extra_body={"ignore_eos": True, **NO_THINKING})
    assert ok.choices[0].finish_reason == "length"


def test_template_kwargs_cannot_carry_apply_chat_template_arguments(trusted):
    client = client_of(trusted)
    for key, value in (("chat_template", TEMPLATE), ("tokenize", True)):
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=2,
                                           extra_body={"chat_template_kwargs": {key: value}})
        assert error_of(e)["message"] == f"Found unexpected chat template kwargs from request: {{'{key}'}}"


# --- thinking_token_budget's refusals (the budget itself: test_thinking_budget.py) ---------------

def test_thinking_token_budget_needs_a_reasoning_parser(plain):
    with pytest.raises(openai.BadRequestError) as e:
        client_of(plain).chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=2,
                                                 extra_body={"thinking_token_budget": 16})
    assert error_of(e) == {
        "message": "thinking_token_budget is set but reasoning_config is not configured. Please set "
                   "--reasoning-parser and/or --reasoning-config to use thinking_token_budget.",
        "type": "BadRequestError", "param": None, "code": 400}
    # -1 is "unlimited": no budget, accepted without a parser.
    r = client_of(plain).chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=2,
                                                 extra_body={"thinking_token_budget": -1, "ignore_eos": True})
    assert r.choices[0].finish_reason == "length"


def test_thinking_token_budget_must_be_an_integer(trusted):
    for bad in (2.5, "8", -2):
        with pytest.raises(openai.BadRequestError) as e:
            client_of(trusted).chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=2,
                                                       extra_body={"thinking_token_budget": bad})
        err = error_of(e)
        assert err["param"] == "thinking_token_budget"
        assert ("`thinking_token_budget` must be a non-negative integer or -1 for unlimited. "
                f"(parameter=thinking_token_budget, value={bad})") in err["message"], err
