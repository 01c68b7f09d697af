#!/usr/bin/env python3
"""Writes the committed seed corpora of the fuzz targets (fuzz/corpus/<name>/) that are derived from
other test data or written here: run `python3 fuzz/make_seed_corpus.py` from anywhere (standard library
only). Reproducers of fixed findings are added to the same folders by hand (named regress-*) and are
kept: this script only rewrites the files whose names it generates (seed-*).

  openai/         valid request bodies of every JSON endpoint (chat with tools, tool_calls, reasoning,
                  logprobs, stream options; completions with prompt lists and token ids; tokenize and
                  detokenize in both forms)
  jinja/          the templates of tests/data/chat_templates/jinja_feature_cases.jsonl (their shared
                  variables are the target's defaults) and every chat template there with one context
  chat_template/  the distinct contexts of tests/data/chat_templates/cases.jsonl for qwen3.6.jinja
  tokenizer/      texts (mode byte < 0xC0) and id lists (mode byte >= 0xC0), see tokenizer_fuzz.cpp
"""
import hashlib
import json
import pathlib
import struct

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"
TEMPLATES = ROOT / "tests" / "data" / "chat_templates"

TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer"}}, "required": ["city"]}}}

OPENAI = {
    "chat-minimal": {"model": "qwen3.6", "messages": [{"role": "user", "content": "Hi"}]},
    "chat-sampling": {"model": "qwen3.6", "messages": [{"role": "system", "content": "Be brief."},
                                                      {"role": "user", "content": "Name a colour."}],
                      "temperature": 0.7, "top_p": 0.9, "top_k": 20, "min_p": 0.05, "seed": 7, "n": 2,
                      "max_completion_tokens": 32, "stop": ["\n\n", "END"], "presence_penalty": 0.5,
                      "frequency_penalty": 0.1, "repetition_penalty": 1.05, "logit_bias": {"100": -100}},
    "chat-tools": {"model": "qwen3.6", "messages": [{"role": "user", "content": "Weather in Paris?"}],
                   "tools": [TOOL], "tool_choice": "auto", "parallel_tool_calls": False},
    "chat-tool-calls": {"model": "qwen3.6", "tools": [TOOL], "messages": [
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {"role": "assistant", "content": "", "reasoning": "Two cities, two calls.", "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": 2}"}},
            {"id": "call_2", "type": "function",
             "function": {"name": "get_weather", "arguments": {"city": "Rome", "unit": "celsius"}}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18C, sunny"},
        {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "22C"}]},
        {"role": "user", "content": "Thanks"}]},
    "chat-reasoning": {"model": "qwen3.6", "messages": [
        {"role": "user", "content": "17*23?"},
        {"role": "assistant", "content": "391", "reasoning_content": "17*23 = 391"},
        {"role": "user", "content": "And 18*23?"}],
        "chat_template_kwargs": {"enable_thinking": True, "preserve_thinking": True},
        "reasoning_effort": "low", "include_reasoning": True},
    "chat-logprobs-stream": {"model": "qwen3.6", "messages": [{"role": "user", "content": "Hi"}],
                             "logprobs": True, "top_logprobs": 5, "stream": True,
                             "stream_options": {"include_usage": True, "continuous_usage_stats": True},
                             "max_tokens": 8, "skip_special_tokens": False,
                             "spaces_between_special_tokens": False, "return_token_ids": True},
    "chat-content-parts": {"model": "qwen3.6", "messages": [
        {"role": "developer", "content": [{"type": "text", "text": "Rules."}]},
        {"role": "user", "name": "bob", "content": [{"type": "text", "text": "Part one"},
                                                    {"type": "text", "text": "part two"}]}],
        "continue_final_message": False, "add_generation_prompt": True},
    "chat-continue": {"model": "qwen3.6", "messages": [{"role": "user", "content": "Count"},
                                                       {"role": "assistant", "content": "1, 2,"}],
                      "continue_final_message": True, "add_generation_prompt": False, "echo": True},
    "chat-extensions": {"model": "qwen3.6", "messages": [{"role": "user", "content": "x"}],
                        "ignore_eos": True, "min_tokens": 2, "max_tokens": 4, "priority": 0,
                        "truncate_prompt_tokens": 100, "truncation_side": "left", "request_id": "r-1",
                        "cache_salt": "s", "user": "u", "stop_token_ids": [248046],
                        "include_stop_str_in_output": True, "return_tokens_as_token_ids": True,
                        "some_unknown_field": 1},
    "completion-text": {"model": "qwen3.6", "prompt": "Once upon a time", "max_tokens": 16,
                        "temperature": 0, "logprobs": 3, "echo": False, "suffix": None},
    "completion-list": {"prompt": ["The capital of France is", "2 + 2 ="], "max_tokens": 5, "n": 1,
                        "stream": True, "stream_options": {"include_usage": False}},
    "completion-ids": {"model": "qwen3.6", "prompt": [9707, 11, 1879, 0, 248045], "max_tokens": 3,
                       "seed": 1, "best_of": 1},
    "completion-id-lists": {"model": "fp4serve-demo", "prompt": [[9707, 11], [1879]], "max_tokens": 2,
                            "add_special_tokens": True},
    "completion-echo": {"model": "qwen3.6", "prompt": "Echo me", "max_tokens": 0, "echo": True},
    "tokenize-prompt": {"model": "qwen3.6", "prompt": "Hello <|im_end|> world", "add_special_tokens": True,
                        "return_token_strs": True},
    "tokenize-chat": {"messages": [{"role": "user", "content": "Hi"}], "tools": [TOOL],
                      "add_generation_prompt": True, "chat_template_kwargs": {"enable_thinking": False}},
    "detokenize": {"model": "qwen3.6", "tokens": [9707, 11, 1879, 248045, 248046]},
}

# Chat-template contexts: keys the target does not take from the input.
SPECIAL_KEYS = {"eos_token", "pad_token", "bos_token", "additional_special_tokens"}

TEXTS = [
    b"Hello, world! How's it going? I'm fine, we'll see.",
    b"def f(x):\n    return x ** 2  # square\n\n\n\tindent\r\n",
    "你好，世界。日本語のテキスト、한국어 텍스트".encode(),
    "emoji 👩‍👩‍👧 flags 🇫🇷 skin 👍🏽".encode(),
    "decomposed e\u0301 a\u0308 \u212b vs \u00c5, hangul \u1100\u1161".encode(),
    "<\u0338 >\u0338 <|im_end|>\u0338".encode(),
    b"<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
    b"<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
    b"<|im_end|><|im_end|><|endoftext|>x<|im_start|",
    b"12345678901234567890 3.14159 1e-9 0x1F",
    b"     spaces      and\n\n\n\nnewlines\t\t",
    b"\xff\xfe invalid \xc3 utf8 \xe2\x82 \xed\xa0\x80 \xf4\x90\x80\x80 \xc0\xaf",
    b"\x00\x01\x02\x7f",
    b"Supercalifragilisticexpialidocious" * 3,
]


def write(folder: str, name: str, data: bytes) -> None:
    path = CORPUS / folder / f"seed-{name}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def short_hash(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()[:10]


def main() -> None:
    for folder in ("openai", "jinja", "chat_template", "tokenizer"):
        for old in (CORPUS / folder).glob("seed-*"):
            old.unlink()

    for name, body in OPENAI.items():
        write("openai", name + ".json", json.dumps(body, ensure_ascii=False).encode())

    for line in (TEMPLATES / "jinja_feature_cases.jsonl").read_text().splitlines():
        case = json.loads(line)
        write("jinja", case["id"], case["template_source"].encode())
    cases = [json.loads(line) for line in (TEMPLATES / "cases.jsonl").read_text().splitlines()]
    for template in sorted(TEMPLATES.glob("*.jinja")):
        context = next(c["context"] for c in cases if c["template"] == template.name)
        values = json.dumps(context, ensure_ascii=False).encode()
        write("jinja", template.stem, template.read_bytes() + b"\0" + values)

    seen = set()
    for case in cases:
        if case["template"] != "qwen3.6.jinja" or case["description"] in seen:
            continue
        seen.add(case["description"])
        context = {k: v for k, v in case["context"].items() if k not in SPECIAL_KEYS}
        data = json.dumps(context, ensure_ascii=False).encode()
        write("chat_template", short_hash(data), data)

    for i, text in enumerate(TEXTS):
        write("tokenizer", f"text-{i:02d}", bytes([i % 4]) + text)
    # Id lists: mode 0xC0, prompt split, then 3 bytes per id (see id_mode): ordinary ids, the UTF-8
    # bytes of "€" as single-byte tokens (0x80 class), added tokens (0xC0 class), edge ids (0xF0).
    ids = [struct.pack(">BH", 0, 9707), struct.pack(">BH", 0, 11)]
    euro = [bytes([0x80, b, 0]) for b in "€".encode()]
    added = [bytes([0xC0, k, 0]) for k in range(4)]
    edges = [bytes([0xF0, k, 0]) for k in range(8)]
    write("tokenizer", "ids-plain", bytes([0xC0, 1]) + b"".join(ids))
    write("tokenizer", "ids-split-char", bytes([0xC1, 2]) + b"".join(ids + euro[:2] + ids + euro[2:]))
    write("tokenizer", "ids-added", bytes([0xC2, 0]) + b"".join(added + ids + added))
    write("tokenizer", "ids-edges", bytes([0xC3, 3]) + b"".join(ids + edges + euro))


if __name__ == "__main__":
    main()
