"""prompt_logprobs, echo with logprobs and bad_words through the official openai client, on the demo
model: vLLM's response shapes (completion choices' prompt_logprobs, chat's top-level one, echo's
prompt entries ahead of the generated ones), vLLM's error messages, and prompt logprobs that do not
depend on chunked prefill or on what the prefix cache holds."""
import json

import openai
import pytest
import requests

MODEL = "fp4serve-demo"
PROMPT = "The quick brown fox jumps over the lazy dog, and then it rests under a tree. " * 4


def tokenize(server, text, add_special_tokens=True):
    r = requests.post(server.url + "/tokenize", json={"prompt": text, "add_special_tokens": add_special_tokens},
                      timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["tokens"]


def decode(server, ids):
    r = requests.post(server.url + "/detokenize", json={"tokens": ids}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["prompt"]


def prompt_logprobs_of(client, prompt, n, **kwargs):
    r = client.completions.create(model=MODEL, prompt=prompt, max_tokens=1, temperature=0,
                                  extra_body={"prompt_logprobs": n}, **kwargs)
    return r.model_dump()["choices"][0]["prompt_logprobs"]


def test_completion_prompt_logprobs_have_vllms_shape(client, server):
    ids = tokenize(server, PROMPT)
    pl = prompt_logprobs_of(client, PROMPT, 3)
    assert len(pl) == len(ids)
    assert pl[0] is None
    for i, entry in enumerate(pl[1:], start=1):
        keys = list(entry)
        assert keys[0] == str(ids[i]), "the prompt token comes first"
        assert 3 <= len(entry) <= 4
        tops = [entry[k] for k in keys if k != str(ids[i])]
        own = entry[str(ids[i])]
        assert all(set(v) == {"logprob", "rank", "decoded_token"} for v in entry.values())
        assert all(v["logprob"] <= 0.0 for v in entry.values())
        ranks = sorted(v["rank"] for v in entry.values())
        if len(entry) == 4:  # the prompt token is not in the top 3: ranked after them
            assert ranks[:3] == [1, 2, 3] and own["rank"] > 3
        else:
            assert ranks == [1, 2, 3]
        assert [t["logprob"] for t in sorted(tops, key=lambda v: v["rank"])] == sorted(
            (t["logprob"] for t in tops), reverse=True)
    for i in (1, 2, len(ids) - 1):
        assert pl[i][str(ids[i])]["decoded_token"] == decode(server, [ids[i]])


def test_echo_with_logprobs_puts_the_prompt_ahead_of_the_output(client, server):
    ids = tokenize(server, PROMPT)
    pl = prompt_logprobs_of(client, ids, 1)
    # What lm-eval sends for loglikelihood: token ids, echo, logprobs 1, max_tokens 1 (or 0).
    for max_tokens in (0, 1):
        r = client.completions.create(model=MODEL, prompt=ids, max_tokens=max_tokens, temperature=0, echo=True,
                                      logprobs=1)
        c = r.choices[0]
        lp = c.logprobs
        n = len(ids) + max_tokens
        assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == n
        assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
        assert lp.text_offset[0] == 0
        assert all(b - a == len(t) for a, b, t in zip(lp.text_offset, lp.text_offset[1:], lp.tokens))
        assert c.text.startswith(decode(server, ids))
        for i in range(1, len(ids)):
            own = pl[i][str(ids[i])]
            assert lp.token_logprobs[i] == own["logprob"]
            assert lp.tokens[i] == own["decoded_token"]
            assert 1 <= len(lp.top_logprobs[i]) <= 2
            assert max(lp.top_logprobs[i].values()) >= lp.token_logprobs[i]
        assert c.model_dump()["prompt_logprobs"] == pl
        assert r.usage.prompt_tokens == len(ids)
        if max_tokens == 1:
            assert lp.token_logprobs[-1] is not None


def test_echo_with_logprobs_streamed_sends_the_prompt_in_the_first_chunk(client, server):
    ids = tokenize(server, PROMPT)
    full = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=4, temperature=0, echo=True, logprobs=2)
    chunks = [c for c in client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=4, temperature=0,
                                                   echo=True, logprobs=2, stream=True) if c.choices]
    first = chunks[0].choices[0]
    assert first.text.startswith(PROMPT)
    assert len(first.logprobs.tokens) == len(ids) + 1
    assert first.logprobs.token_logprobs[0] is None
    tokens = [t for c in chunks for t in c.choices[0].logprobs.tokens]
    token_logprobs = [t for c in chunks for t in c.choices[0].logprobs.token_logprobs]
    offsets = [t for c in chunks for t in c.choices[0].logprobs.text_offset]
    assert tokens == full.choices[0].logprobs.tokens
    assert token_logprobs == full.choices[0].logprobs.token_logprobs
    assert offsets == full.choices[0].logprobs.text_offset
    assert "".join(c.choices[0].text for c in chunks) == full.choices[0].text


def test_chat_prompt_logprobs_sit_at_the_top_level(client):
    r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi there"}], max_tokens=1,
                                       temperature=0, extra_body={"prompt_logprobs": 2})
    body = r.model_dump()
    pl = body["prompt_logprobs"]
    assert len(pl) == r.usage.prompt_tokens
    assert pl[0] is None and all(2 <= len(e) <= 3 for e in pl[1:])
    assert "prompt_logprobs" not in body["choices"][0] or body["choices"][0]["prompt_logprobs"] is None


BOTH = (("/v1/completions", {"prompt": "Hello"}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hello"}]}))


@pytest.mark.parametrize("body,message,param,endpoints", [
    ({"prompt_logprobs": 21}, "Requested prompt logprobs of 21, which is greater than max allowed: 20", "prompt_logprobs",
     BOTH),
    ({"prompt_logprobs": -1}, "Requested prompt logprobs of 248320, which is greater than max allowed: 20",
     "prompt_logprobs", BOTH),
    ({"prompt_logprobs": 2, "stream": True}, "`prompt_logprobs` are not available when `stream=True`.", None, BOTH),
    ({"prompt_logprobs": -2}, "`prompt_logprobs` must be a positive value or -1.", None, BOTH),
    ({"echo": True, "logprobs": 21}, "Requested sample logprobs of 21, which is greater than max allowed: 20",
     "logprobs", BOTH[:1]),
    ({"bad_words": ["ok", ""]}, "bad_words cannot contain an empty string. Got bad_words=['ok', '']", None, BOTH),
    ({"bad_words": [" \t"]}, "bad_words entries must tokenize to at least one token.", "bad_words", BOTH),
])
def test_bad_values_get_vllms_400(server, body, message, param, endpoints):
    for path, base in endpoints:
        r = requests.post(server.url + path, json={"model": MODEL, "max_tokens": 2, **base, **body}, timeout=30)
        assert r.status_code == 400, r.text
        err = r.json()["error"]
        assert message in err["message"], err
        if param:
            assert err["param"] == param, err


def test_prompt_logprobs_do_not_depend_on_chunking_or_the_prefix_cache(client, make_server, server):
    ids = tokenize(server, PROMPT)
    reference = prompt_logprobs_of(client, ids, 2)
    small = make_server("--max-num-batched-tokens", "16", "--enable-prompt-tokens-details")
    small_client = openai.OpenAI(base_url=small.url + "/v1", api_key="unused")
    # Warm the cache with the same prompt: the prompt-logprobs request must not read it.
    small_client.completions.create(model=MODEL, prompt=ids, max_tokens=1, temperature=0)
    r = small_client.completions.create(model=MODEL, prompt=ids, max_tokens=1, temperature=0,
                                        extra_body={"prompt_logprobs": 2})
    assert r.usage.prompt_tokens_details.cached_tokens == 0
    assert r.model_dump()["choices"][0]["prompt_logprobs"] == reference
    again = small_client.completions.create(model=MODEL, prompt=ids, max_tokens=1, temperature=0)
    assert again.usage.prompt_tokens_details.cached_tokens > 0, "the cache was still filled"


def test_bad_words_are_never_generated(client, server):
    plain = client.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=12, temperature=0,
                                      extra_body={"return_token_ids": True})
    out_ids = plain.choices[0].token_ids
    # vLLM's tokenization of a bad word: the word, and " " + word when that is as long but starts
    # with another token. Pick a generated token that is a one-token bad word by that rule.
    def banned_single_tokens(word):
        plain, spaced = tokenize(server, word, False), tokenize(server, " " + word, False)
        seqs = [plain] + ([spaced] if len(spaced) == len(plain) and spaced[0] != plain[0] else [])
        return {s[0] for s in seqs if len(s) == 1}

    word = None
    for tid in out_ids:
        text = decode(server, [tid]).strip()
        if text and "\ufffd" not in text and tid in banned_single_tokens(text):
            word = text
            break
    assert word is not None, [decode(server, [t]) for t in out_ids]
    banned = banned_single_tokens(word)
    r = client.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=12, temperature=0,
                                  extra_body={"return_token_ids": True, "bad_words": [word]})
    ids = r.choices[0].token_ids
    assert len(ids) == 12
    assert not banned & set(ids), (word, ids)
    assert ids != out_ids
    chat = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Once upon a time"}],
                                          max_tokens=8, temperature=0, extra_body={"bad_words": [word]})
    assert chat.choices[0].finish_reason in ("length", "stop")
