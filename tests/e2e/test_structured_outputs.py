"""Structured output through the official openai client on the demo model (random weights: left
alone it writes nonsense, so every well-formed answer here is the grammar's doing): 20 real-world
JSON schemas x 10 requests (chat and completions, streamed and not, response_format and
structured_outputs) validated with python `jsonschema`; regex, choice and json_object; forced tool
calls (tool_choice "required" and named, streamed and not) validated against the tools' parameter
schemas; the reasoning stays unconstrained and the constraint starts after </think>; vLLM's 400s for
bad schemas, regexes, grammars and conflicting options. docs/vllm-surface.md §1.4.

Why the outputs can finish: a random model never chooses to stop, so only the grammar ends an
answer. Every string has a maxLength, every array a maxItems and every number bounds, and the
requests turn off free whitespace (vLLM's `disable_any_whitespace`: with it on, a random model
spends its tokens on whitespace, see test_response_format_json_schema), so each schema admits only
short documents and xgrammar forces the closing tokens. max_tokens stays large enough for the
longest admitted document; an answer cut by "length" would not be JSON, so the tests require that
every answer that finished with "stop" validates and that at least 95% finished with "stop"."""
import json
import re
from concurrent.futures import ThreadPoolExecutor

import jsonschema
import openai
import pytest
import requests

MODEL = "fp4serve-demo"
NO_THINKING = {"chat_template_kwargs": {"enable_thinking": False}}
# The demo model's template closes the reasoning block unless thinking is asked for.
THINKING = {"chat_template_kwargs": {"enable_thinking": True}}
MAX_TOKENS = 160
CONCURRENCY = 32

S = {"type": "string", "maxLength": 8}
TAG = {"type": "string", "enum": ["red", "green", "blue"]}

# Twenty schemas of the shapes APIs ask for: nested objects, arrays, enums, bounded numbers,
# required and optional fields, $ref/$defs.
SCHEMAS = {
    "person": {"type": "object", "properties": {"name": S, "age": {"type": "integer", "minimum": 0, "maximum": 120}},
               "required": ["name", "age"]},
    "address": {"type": "object", "properties": {"street": S, "city": S, "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
                                                 "country": {"type": "string", "enum": ["FR", "DE", "US"]}},
                "required": ["city", "country"]},
    "weather": {"type": "object", "properties": {"city": S, "celsius": {"type": "number", "minimum": -50, "maximum": 60},
                                                 "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                "required": ["city", "celsius", "unit"]},
    "product": {"type": "object", "properties": {"sku": S, "price": {"type": "number", "minimum": 0, "maximum": 1000},
                                                 "in_stock": {"type": "boolean"}, "tags": {"type": "array", "items": TAG, "maxItems": 3}},
                "required": ["sku", "price", "in_stock"]},
    "order": {"type": "object", "properties": {
        "id": {"type": "integer", "minimum": 1, "maximum": 99999},
        "items": {"type": "array", "minItems": 1, "maxItems": 3, "items": {
            "type": "object", "properties": {"sku": S, "qty": {"type": "integer", "minimum": 1, "maximum": 9}},
            "required": ["sku", "qty"]}}},
        "required": ["id", "items"]},
    "event": {"type": "object", "properties": {"title": S, "day": {"type": "integer", "minimum": 1, "maximum": 31},
                                               "month": {"type": "integer", "minimum": 1, "maximum": 12},
                                               "all_day": {"type": "boolean"}},
              "required": ["title", "day", "month"]},
    "sentiment": {"type": "object", "properties": {"label": {"type": "string", "enum": ["positive", "negative", "neutral"]},
                                                   "score": {"type": "number", "minimum": 0, "maximum": 1}},
                  "required": ["label", "score"]},
    "entities": {"type": "object", "properties": {"entities": {"type": "array", "maxItems": 3, "items": {
        "type": "object", "properties": {"text": S, "kind": {"type": "string", "enum": ["PER", "ORG", "LOC"]}},
        "required": ["text", "kind"]}}}, "required": ["entities"]},
    "tree": {"$defs": {"leaf": {"type": "object", "properties": {"value": {"type": "integer", "minimum": 0, "maximum": 9}},
                                "required": ["value"]}},
             "type": "object", "properties": {"left": {"$ref": "#/$defs/leaf"}, "right": {"$ref": "#/$defs/leaf"}},
             "required": ["left", "right"]},
    "invoice": {"$defs": {"line": {"type": "object", "properties": {"desc": S, "amount": {"type": "integer", "minimum": 0, "maximum": 500}},
                                   "required": ["desc", "amount"]}},
                "type": "object", "properties": {"number": S, "lines": {"type": "array", "items": {"$ref": "#/$defs/line"}, "maxItems": 2},
                                                 "paid": {"type": "boolean"}},
                "required": ["number", "lines", "paid"]},
    "user_profile": {"type": "object", "properties": {
        "username": S, "email": {"type": "string", "maxLength": 10},
        "settings": {"type": "object", "properties": {"theme": {"type": "string", "enum": ["dark", "light"]},
                                                       "notifications": {"type": "boolean"}},
                     "required": ["theme"]}},
        "required": ["username", "settings"]},
    "coordinates": {"type": "object", "properties": {"lat": {"type": "number", "minimum": -90, "maximum": 90},
                                                     "lon": {"type": "number", "minimum": -180, "maximum": 180}},
                    "required": ["lat", "lon"]},
    "task_list": {"type": "array", "minItems": 1, "maxItems": 3, "items": {
        "type": "object", "properties": {"task": S, "done": {"type": "boolean"},
                                         "priority": {"type": "string", "enum": ["low", "high"]}},
        "required": ["task", "done"]}},
    "http_request": {"type": "object", "properties": {"method": {"type": "string", "enum": ["GET", "POST", "PUT", "DELETE"]},
                                                      "path": S, "status": {"type": "integer", "minimum": 100, "maximum": 599}},
                     "required": ["method", "path", "status"]},
    "movie": {"type": "object", "properties": {"title": S, "year": {"type": "integer", "minimum": 1900, "maximum": 2030},
                                               "genres": {"type": "array", "items": {"type": "string", "enum": ["drama", "comedy", "horror"]},
                                                          "maxItems": 2},
                                               "rating": {"type": "number", "minimum": 0, "maximum": 10}},
              "required": ["title", "year"]},
    "recipe": {"type": "object", "properties": {
        "name": S, "servings": {"type": "integer", "minimum": 1, "maximum": 12},
        "ingredients": {"type": "array", "minItems": 1, "maxItems": 3, "items": {
            "type": "object", "properties": {"item": S, "grams": {"type": "integer", "minimum": 1, "maximum": 999}},
            "required": ["item", "grams"]}}},
        "required": ["name", "ingredients"]},
    "classification": {"type": "object", "properties": {"category": {"type": "string", "enum": ["bug", "feature", "question"]},
                                                        "confidence": {"type": "integer", "minimum": 0, "maximum": 100},
                                                        "reason": S},
                       "required": ["category", "confidence"]},
    "company": {"$defs": {"person": {"type": "object", "properties": {"name": S, "role": {"type": "string", "enum": ["ceo", "cto", "dev"]}},
                                     "required": ["name", "role"]}},
                "type": "object", "properties": {"name": S, "founder": {"$ref": "#/$defs/person"},
                                                 "staff": {"type": "array", "items": {"$ref": "#/$defs/person"}, "maxItems": 2}},
                "required": ["name", "founder"]},
    "nullable_fields": {"type": "object", "properties": {"note": {"anyOf": [S, {"type": "null"}]},
                                                         "count": {"type": "integer", "minimum": 0, "maximum": 5}},
                        "required": ["note", "count"]},
    "matrix": {"type": "object", "properties": {"rows": {"type": "array", "minItems": 1, "maxItems": 2, "items": {
        "type": "array", "minItems": 1, "maxItems": 3, "items": {"type": "integer", "minimum": -9, "maximum": 9}}}},
        "required": ["rows"]},
}
assert len(SCHEMAS) == 20


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=300)


def stream_chat(client, **kwargs):
    """(content, reasoning, finish_reason) of a streamed chat completion."""
    content, reasoning, finish = "", "", None
    for chunk in client.chat.completions.create(stream=True, **kwargs):
        for c in chunk.choices:
            content += c.delta.content or ""
            reasoning += getattr(c.delta, "reasoning", None) or ""
            finish = c.finish_reason or finish
    return content, reasoning, finish


def stream_completion(client, **kwargs):
    text, finish = "", None
    for chunk in client.completions.create(stream=True, **kwargs):
        for c in chunk.choices:
            text += c.text
            finish = c.finish_reason or finish
    return text, finish


def run_json_request(client, name, schema, k):
    """Request k of schema `name`: the ten requests of a schema spread over both endpoints,
    streamed and not, with the schema as an object or as its JSON text."""
    prompt = f"Give me a {name.replace('_', ' ')} as JSON."
    so = {"structured_outputs": {"json": schema if k % 2 else json.dumps(schema), "disable_any_whitespace": True}}
    common = {"model": MODEL, "max_tokens": MAX_TOKENS, "seed": k}
    messages = [{"role": "user", "content": prompt}]
    if k < 3:
        r = client.chat.completions.create(messages=messages, extra_body={**so, **NO_THINKING}, **common)
        return r.choices[0].message.content, r.choices[0].finish_reason
    if k < 6:
        return stream_chat(client, messages=messages, extra_body={**so, **NO_THINKING}, **common)[::2]
    if k < 8:
        r = client.completions.create(prompt=prompt, extra_body=so, **common)
        return r.choices[0].text, r.choices[0].finish_reason
    return stream_completion(client, prompt=prompt, extra_body=so, **common)


def check_outputs(results, validate):
    """Every answer that stopped validates; at least 95% stopped (the rest were cut by length)."""
    stopped = [(text, key) for text, finish, key in results if finish == "stop"]
    for text, key in stopped:
        validate(text, key)
    assert len(stopped) >= 0.95 * len(results), \
        f"{len(results) - len(stopped)} of {len(results)} answers did not finish with stop: " + \
        repr([(key, finish, text[:80]) for text, finish, key in results if finish != "stop"][:5])


def test_json_schemas_200_requests_validate(client):
    jobs = [(name, schema, k) for name, schema in SCHEMAS.items() for k in range(10)]
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        outs = list(pool.map(lambda job: run_json_request(client, *job), jobs))
    results = [(text, finish, name) for (text, finish), (name, _, _) in zip(outs, jobs)]
    assert len(results) == 200

    def validate(text, name):
        # Strict parsing: xgrammar 0.2.9's maxLength strings admit raw control characters, which JSON
        # forbids; the engine never allows a token holding one in a JSON constraint (token_filter).
        jsonschema.validate(json.loads(text), SCHEMAS[name])

    check_outputs(results, validate)


def test_response_format_json_schema(client):
    # OpenAI's way of asking, with free whitespace (vLLM's default). Whitespace is bounded per gap
    # (32 characters, docs/vllm-surface.md §1.4), so even the random model closes its JSON: the same
    # rule as the structured_outputs requests above (every stopped answer validates, >= 95% stop).
    def run(item):
        k, (name, schema) = item
        rf = {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}
        kwargs = {"model": MODEL, "messages": [{"role": "user", "content": "JSON please."}], "max_tokens": MAX_TOKENS,
                  "seed": k, "response_format": rf, "extra_body": NO_THINKING}
        if k % 2:
            return (*stream_chat(client, **kwargs)[::2], name)
        r = client.chat.completions.create(**kwargs)
        return r.choices[0].message.content, r.choices[0].finish_reason, name

    with ThreadPoolExecutor(CONCURRENCY) as pool:
        results = list(pool.map(run, enumerate(list(SCHEMAS.items()) * 2)))
    check_outputs(results, lambda text, name: jsonschema.validate(json.loads(text), SCHEMAS[name]))


REGEXES = [r"[0-9]{3}-[0-9]{4}", r"(yes|no|maybe)", r"[A-Z][a-z]{1,6} [A-Z][a-z]{1,6}", r"#[0-9a-f]{6}",
           r"[a-z]{2,5}@[a-z]{2,5}\.(com|org)"]
CHOICES = [["Paris", "London", "Berlin"], ["positive", "negative"], ["A", "B", "C", "D"]]


def test_regex_choice_and_json_object(client):
    jobs = []
    for i, pattern in enumerate(REGEXES):
        jobs += [("regex", pattern, i, stream) for stream in (False, True)]
    for i, choice in enumerate(CHOICES):
        jobs += [("choice", choice, i, stream) for stream in (False, True)]
    jobs += [("json_object", None, i, i % 2 == 1) for i in range(4)]

    def run(job):
        kind, spec, seed, stream = job
        body = {"structured_outputs": {kind: spec if kind != "json_object" else True, "disable_any_whitespace": True}}
        if kind == "json_object":  # response_format's way, the way clients ask for it
            body = {"response_format": {"type": "json_object"}}
        messages = [{"role": "user", "content": "Answer."}]
        kwargs = {"model": MODEL, "messages": messages, "max_tokens": 48, "seed": seed,
                  "extra_body": {**body, **NO_THINKING}}
        if kind == "json_object":
            kwargs.pop("extra_body")
            kwargs["response_format"] = body["response_format"]
            kwargs["extra_body"] = NO_THINKING
            kwargs["max_tokens"] = MAX_TOKENS
        if stream:
            text, _, finish = stream_chat(client, **kwargs)
        else:
            r = client.chat.completions.create(**kwargs)
            text, finish = r.choices[0].message.content, r.choices[0].finish_reason
        return text, finish, job

    with ThreadPoolExecutor(CONCURRENCY) as pool:
        results = list(pool.map(run, jobs))

    def validate(text, job):
        kind, spec = job[0], job[1]
        if kind == "regex":
            assert re.fullmatch(spec, text), (spec, text)
        elif kind == "choice":
            assert text in spec, (spec, text)
        else:
            assert isinstance(json.loads(text), dict), text

    # regex and choice answers are short and always close; json_object bounds no string, so a random
    # model may run to max_tokens there: only its finished answers are checked.
    assert all(finish == "stop" for _, finish, job in results if job[0] != "json_object")
    check_outputs([r for r in results if r[2][0] != "json_object"], validate)
    for text, finish, job in results:
        if job[0] == "json_object" and finish == "stop":
            validate(text, job)


TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                      "parameters": {"type": "object", "properties": {
                                          "city": S, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                                          "required": ["city", "unit"]}}},
    {"type": "function", "function": {"name": "book_table", "description": "Book a table",
                                      "parameters": {"$defs": {"time": {"type": "integer", "minimum": 17, "maximum": 23}},
                                                     "type": "object", "properties": {
                                                         "people": {"type": "integer", "minimum": 1, "maximum": 8},
                                                         "hour": {"$ref": "#/$defs/time"}},
                                                     "required": ["people", "hour"]}}},
]
PARAMS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


def collect_stream_calls(client, **kwargs):
    """Tool calls assembled from a stream the way clients do (fragments by index), plus content."""
    calls, content, finish = {}, "", None
    for chunk in client.chat.completions.create(stream=True, **kwargs):
        for c in chunk.choices:
            content += c.delta.content or ""
            finish = c.finish_reason or finish
            for tc in c.delta.tool_calls or []:
                slot = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
                if tc.id:
                    slot["id"] = tc.id
                if tc.function and tc.function.name:
                    slot["name"] += tc.function.name
                if tc.function and tc.function.arguments:
                    slot["arguments"] += tc.function.arguments
    return [calls[i] for i in sorted(calls)], content, finish


def test_forced_tool_calls(client):
    named = {"type": "function", "function": {"name": "book_table"}}
    jobs = [(choice, stream, seed) for choice in ("required", "named") for stream in (False, True) for seed in range(3)]

    def run(job):
        choice, stream, seed = job
        kwargs = {"model": MODEL, "messages": [{"role": "user", "content": "Book dinner in Paris."}], "tools": TOOLS,
                  "tool_choice": "required" if choice == "required" else named, "max_tokens": MAX_TOKENS,
                  "seed": seed, "extra_body": NO_THINKING}
        if stream:
            return collect_stream_calls(client, **kwargs)
        r = client.chat.completions.create(**kwargs)
        m = r.choices[0].message
        calls = [{"id": c.id, "name": c.function.name, "arguments": c.function.arguments} for c in m.tool_calls or []]
        return calls, m.content, r.choices[0].finish_reason

    with ThreadPoolExecutor(CONCURRENCY) as pool:
        results = list(pool.map(run, jobs))
    stopped = 0
    for (choice, stream, _), (calls, content, finish) in zip(jobs, results):
        if finish not in ("stop", "tool_calls"):
            continue
        stopped += 1
        # vLLM: "tool_calls" for required, the engine's "stop" for a named function.
        assert finish == ("tool_calls" if choice == "required" else "stop"), (choice, stream, finish)
        assert calls, (choice, stream, content)
        assert not content, (choice, stream, content)
        for call in calls:
            assert call["id"], call
            if choice == "named":
                assert call["name"] == "book_table"
            jsonschema.validate(json.loads(call["arguments"]), PARAMS[call["name"]])
    # vLLM's tool schemas keep free whitespace, where a random model rarely closes the JSON within
    # max_tokens: the finished answers are checked above, and at least one must have finished.
    assert stopped >= 1


def test_reasoning_is_free_and_the_constraint_starts_after_it(client):
    # Thinking on: the prompt opens <think>; the budget forces </think> after 8 reasoning tokens,
    # then the answer must follow the schema while the reasoning before it did not have to.
    schema = SCHEMAS["person"]
    r = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Who?"}], max_tokens=MAX_TOKENS, seed=1,
        extra_body={"thinking_token_budget": 8, "structured_outputs": {"json": schema, "disable_any_whitespace": True},
                    **THINKING})
    m = r.choices[0].message
    # vLLM's field is `reasoning` (reasoning_content only with the compatibility switch).
    assert getattr(m, "reasoning", None), "the reasoning comes back in its own field"
    assert r.choices[0].finish_reason == "stop", m
    jsonschema.validate(json.loads(m.content), schema)
    # A forced call under reasoning: the calls are parsed from the text after </think>.
    r = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Weather?"}], max_tokens=MAX_TOKENS, seed=2, tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        extra_body={"thinking_token_budget": 4, **THINKING})
    m = r.choices[0].message
    assert getattr(m, "reasoning", None)
    assert r.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(m.tool_calls[0].function.arguments), PARAMS["get_weather"])


def post(server, path, body):
    return requests.post(server.url + path, json={"model": MODEL, **body}, timeout=60)


@pytest.mark.parametrize("body,needle", [
    ({"structured_outputs": {"json": {"type": "objectt"}}}, "Failed to transform json schema into a grammar: "),
    ({"structured_outputs": {"json": "{not json"}}, "Invalid JSON grammar specification."),
    ({"structured_outputs": {"json": {"type": "array", "uniqueItems": True}}},
     "The provided JSON schema contains features not supported by xgrammar."),
    ({"structured_outputs": {"regex": "a("}}, "Failed to transform regex into a grammar: "),
    ({"structured_outputs": {"grammar": "root ::= ("}}, "Invalid grammar specification"),
    ({"structured_outputs": {"regex": "a", "choice": ["a"]}},
     "You can only use one kind of constraints for structured outputs ('json', 'regex' or 'choice')."),
    ({"structured_outputs": {"regex": "a", "grammar": "root ::= \"a\""}},
     "You can only use one kind of structured outputs constraint but multiple are specified"),
    ({"structured_outputs": {"regex": "a"}, "response_format": {"type": "json_object"}},
     "You can only use one kind of structured outputs constraint but multiple are specified"),
    ({"response_format": {"type": "json_schema"}},
     "When response_format type is 'json_schema', the 'json_schema' field must be provided."),
    ({"structured_outputs": {"structural_tag": "{}"}}, "not supported by fp4serve"),
])
def test_bad_constraints_are_400(server, body, needle):
    for path, extra in (("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}]}),
                        ("/v1/completions", {"prompt": "x"})):
        r = post(server, path, {**extra, **body, "max_tokens": 4})
        assert r.status_code == 400, (path, r.text)
        error = r.json()["error"]
        assert needle in error["message"], (path, error)


def test_named_tool_with_a_constraint_is_400(server):
    r = post(server, "/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "tools": TOOLS,
                                              "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
                                              "structured_outputs": {"regex": "a"}})
    assert r.status_code == 400
    assert "You can only either use constraints for structured outputs or tools, not both." in r.json()["error"]["message"]
