"""Malformed and out-of-range input over raw HTTP: every answer is the OpenAI error envelope with
vLLM's status, never a crash or a hang."""
import json

import requests

MODEL = "fp4serve-demo"


def post(server, path, body, headers=None):
    data = body if isinstance(body, (str, bytes)) else json.dumps(body)
    return requests.post(server.url + path, data=data, timeout=30,
                         headers={"Content-Type": "application/json", **(headers or {})})


def envelope(r):
    e = r.json()["error"]
    assert set(e) == {"message", "type", "param", "code"}
    assert e["code"] == r.status_code
    return e


def test_malformed_json(server):
    r = post(server, "/v1/completions", '{"model": "x", "prompt": ')
    assert r.status_code == 400
    envelope(r)


def test_wrong_types(server):
    r = post(server, "/v1/completions", {"model": MODEL, "prompt": "x", "max_tokens": "many"})
    assert r.status_code == 400
    assert "max_tokens" in envelope(r)["message"]
    r = post(server, "/v1/chat/completions", {"model": MODEL, "messages": "hi"})
    assert r.status_code == 400
    envelope(r)


def test_unknown_model(server):
    r = post(server, "/v1/chat/completions", {"model": "gpt-4", "messages": [{"role": "user", "content": "x"}]})
    assert r.status_code == 404
    assert envelope(r)["message"] == "The model `gpt-4` does not exist."


def test_prompt_longer_than_max_model_len(server):
    r = post(server, "/v1/completions", {"model": MODEL, "prompt": "hello " * 3000, "max_tokens": 4})
    assert r.status_code == 400
    e = envelope(r)
    assert "the model's context length is only 2048 tokens" in e["message"]
    assert e["param"] == "input_tokens"


def test_max_tokens_too_large(server):
    r = post(server, "/v1/completions", {"model": MODEL, "prompt": "hi", "max_tokens": 5000})
    assert r.status_code == 400
    envelope(r)


def test_out_of_range_sampling_values(server):
    for field, value in [("temperature", -1), ("top_p", 0), ("top_k", -5), ("presence_penalty", 3),
                         ("min_p", 2), ("n", 0)]:
        r = post(server, "/v1/completions", {"model": MODEL, "prompt": "hi", "max_tokens": 2, field: value})
        assert r.status_code == 400, (field, r.text)
        envelope(r)


def test_tool_choice_without_tools(server):
    r = post(server, "/v1/chat/completions", {"model": MODEL, "messages": [{"role": "user", "content": "x"}],
                                              "tool_choice": "required"})
    assert r.status_code == 400
    envelope(r)


def test_stream_options_without_stream(server):
    r = post(server, "/v1/completions", {"model": MODEL, "prompt": "x", "stream_options": {"include_usage": True}})
    assert r.status_code == 400
    assert "Stream options can only be defined when `stream=True`." in envelope(r)["message"]


def test_unknown_route_and_wrong_method(server):
    assert requests.get(server.url + "/v1/nothing", timeout=10).status_code == 404
    assert requests.get(server.url + "/v1/completions", timeout=10).status_code == 405


def test_tokenize_detokenize_version_metrics(server):
    t = post(server, "/tokenize", {"model": MODEL, "prompt": "Hello world"}).json()
    assert t["count"] == len(t["tokens"]) and t["max_model_len"] == 2048
    d = post(server, "/detokenize", {"model": MODEL, "tokens": t["tokens"]}).json()
    assert d["prompt"] == "Hello world"
    assert "version" in requests.get(server.url + "/version", timeout=10).json()
    m = requests.get(server.url + "/metrics", timeout=10).text
    for name in ["vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                 "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total", "vllm:num_preemptions_total",
                 "vllm:prompt_tokens_total", "vllm:generation_tokens_total",
                 "vllm:time_to_first_token_seconds_bucket", "vllm:inter_token_latency_seconds_bucket",
                 "vllm:e2e_request_latency_seconds_bucket"]:
        assert name in m, name
    assert 'model_name="fp4serve-demo"' in m


def test_api_key(make_server):
    s = make_server("--api-key", "sekret")
    r = post(s, "/v1/completions", {"model": MODEL, "prompt": "x", "max_tokens": 1})
    assert r.status_code == 401
    assert r.json() == {"error": "Unauthorized"}
    r = post(s, "/v1/completions", {"model": MODEL, "prompt": "x", "max_tokens": 1},
             headers={"Authorization": "Bearer sekret"})
    assert r.status_code == 200
    assert requests.get(s.url + "/health", timeout=10).status_code == 200  # not guarded, as vLLM
    s.stop()
