#!/usr/bin/env python3
"""Builds the chat-template parity cases for fp4serve's Jinja engine (tests/unit/tokenizer).

Expected outputs come from transformers' own `apply_chat_template(tokenize=False)` on a real
PreTrainedTokenizerFast (the complete Qwen3 tokenizer in ../shared/data/qwen-tokenizer/qwen3-fallback;
the tokenizer only supplies special_tokens_map -- the template is passed explicitly), so the
reference is exactly what transformers renders: jinja2 ImmutableSandboxedEnvironment with
trim_blocks/lstrip_blocks, transformers' tojson/raise_exception/strftime_now.

Each case records the complete template context transformers passes ({**special_tokens_map,
**kwargs, messages, tools, documents, add_generation_prompt}); the script re-renders that context with
transformers' compiled template and checks it reproduces apply_chat_template's output, so the C++ test
can feed the context verbatim.

Outputs (all under tests/data/chat_templates/):
  *.jinja       the templates (copied from ../shared/data; qwen3.6.jinja derived, see README.md)
  cases.jsonl   one JSON object per line: id, template, description, context, and either
                expected (rendered text) or error {type, message, raised}.
  jinja_feature_cases.jsonl  small templates, one Jinja feature each (template_source, context,
                expected or error {type, message, raised, syntax}), rendered by the same environment.

Run:  .venv/bin/python tools/reference/make_chat_template_cases.py
"""

from __future__ import annotations

import copy
import gzip
import json
import shutil
import sys
import tempfile
from pathlib import Path

import jinja2
import transformers
from transformers import AutoTokenizer
from transformers.utils.chat_template_utils import _compile_jinja_template

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "data"
OUT = REPO / "tests" / "data" / "chat_templates"

TEMPLATE_SOURCES = {
    "qwen3.5.jinja": SHARED / "qwen-tokenizer" / "qwen3.5-partial" / "chat_template.jinja",
    "Qwen3.5-4B.llama.cpp.jinja": SHARED / "chat-templates" / "Qwen3.5-4B.llama.cpp.jinja",
    "Qwen-QwQ-32B.jinja": SHARED / "chat-templates" / "Qwen-QwQ-32B.jinja",
    "Qwen-Qwen2.5-7B-Instruct.jinja": SHARED / "chat-templates" / "Qwen-Qwen2.5-7B-Instruct.jinja",
    "Qwen-Qwen3-0.6B.jinja": SHARED / "chat-templates" / "Qwen-Qwen3-0.6B.jinja",
    "Qwen3-Coder.jinja": SHARED / "chat-templates" / "Qwen3-Coder.jinja",
}

# Qwen3.6 = the Qwen3.5-35B-A3B template (thinking on by default; the llama.cpp copy) with the
# preserve_thinking switch of docs/model-arch.md §5.2.
QWEN36_FROM = "Qwen3.5-4B.llama.cpp.jinja"
QWEN36_OLD = "{%- if loop.index0 > ns.last_query_index %}"
QWEN36_NEW = (
    "{%- if (preserve_thinking is defined and preserve_thinking is true) "
    "or (loop.index0 > ns.last_query_index) %}"
)


def load_tokenizer(tmp: Path):
    src = SHARED / "qwen-tokenizer" / "qwen3-fallback"
    with gzip.open(src / "tokenizer.json.gz", "rb") as f:
        (tmp / "tokenizer.json").write_bytes(f.read())
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(src / name, tmp / name)
    return AutoTokenizer.from_pretrained(str(tmp))


# ---------------------------------------------------------------------------------------------
# Conversation material

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_current_weather",
        "description": "Get the current weather in a given location.\nUse it for \"now\" questions, <not> forecasts.",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": " Unit "},
                "days": {"type": "integer", "minimum": 1, "maximum": 14, "default": 1},
            },
            "required": ["location"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "web_search",
        "description": "Search the web — returns snippets (日本語 OK) 🔎",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "filters": {
                    "type": "object",
                    "properties": {"site": {"type": "string"}, "recent": {"type": "boolean"}},
                    "additionalProperties": False,
                },
                "limit": {"type": ["integer", "null"], "description": "max results", "default": None},
                "weights": {"type": "array", "items": {"type": "number"}},
            },
            "required": ["query"],
        },
        "strict": True,
    },
}
FLAT_TOOL = {  # a bare function schema without the {"type": "function"} wrapper
    "name": "calculator",
    "description": "Evaluate an arithmetic expression",
    "parameters": {"type": "object", "properties": {"expr": {"type": "string"}}},
}

SYSTEM = {"role": "system", "content": "You are a helpful assistant. Answer briefly."}
USER1 = {"role": "user", "content": "What is the capital of France?"}
ASSIST1 = {"role": "assistant", "content": "The capital of France is Paris."}
USER2 = {"role": "user", "content": "And of Germany?\nAnswer in one word."}


def tool_call(name, arguments, call_id="call_1", wrap=True):
    if not wrap:
        return {"name": name, "arguments": arguments}
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


ARGS_RICH = {
    "query": "weather in Paris \"today\" <b>",
    "limit": 5,
    "ratio": 0.25,
    "tiny": 1e-07,
    "big": 1e20,
    "whole": 3.0,
    "neg": -17,
    "flag": True,
    "off": False,
    "nothing": None,
    "tags": ["a", "b", "ü"],
    "filters": {"site": "example.org", "recent": True, "nested": {"k": [1, 2.5, None]}},
    "empty_list": [],
    "empty_obj": {},
}


def scenarios():
    """(name, description, messages, tools, extra_kwargs)"""
    s = []
    add = lambda *a: s.append(a)  # noqa: E731
    add("single_user", "one user message", [USER1], None, {})
    add("system_user", "system prompt + user", [SYSTEM, USER1], None, {})
    add("multi_turn", "system + user/assistant/user", [SYSTEM, USER1, ASSIST1, USER2], None, {})
    add(
        "reasoning_history",
        "assistant turns with reasoning_content before and after the last user query",
        [
            USER1,
            {"role": "assistant", "content": "Paris.", "reasoning_content": "France -> Paris."},
            USER2,
            {"role": "assistant", "content": "Berlin.", "reasoning_content": "\n  Germany -> Berlin.  \n"},
        ],
        None,
        {},
    )
    add(
        "think_in_content",
        "reasoning embedded as <think> in content, historical and final",
        [
            USER1,
            {"role": "assistant", "content": "<think>\nThe user asks about France.\n</think>\n\nParis."},
            USER2,
            {"role": "assistant", "content": "<think>Germany's capital.</think>Berlin."},
        ],
        None,
        {},
    )
    add(
        "think_last_assistant_prefill",
        "last message is an assistant turn with only reasoning",
        [USER1, {"role": "assistant", "content": "<think>\nhmm\n</think>\n\n"}],
        None,
        {},
    )
    add("tools_user", "tool schemas + user", [USER1], [WEATHER_TOOL, SEARCH_TOOL], {})
    add("tools_system_user", "tool schemas + system + user", [SYSTEM, USER1], [WEATHER_TOOL], {})
    add("tools_flat_schema", "a tool given as a bare function schema", [USER1], [FLAT_TOOL], {})
    add(
        "tool_call_dict_args",
        "assistant tool call (arguments as dict), tool response, final answer",
        [
            SYSTEM,
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [tool_call("get_current_weather", {"location": "Paris", "unit": "celsius", "days": 2})],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 21, "sky": "clear"}'},
            {"role": "assistant", "content": "It is 21 °C and clear."},
        ],
        [WEATHER_TOOL],
        {},
    )
    add(
        "tool_call_rich_args",
        "tool call whose arguments hold every JSON type",
        [{"role": "user", "content": "search"}, {"role": "assistant", "content": None, "tool_calls": [tool_call("web_search", ARGS_RICH)]}],
        [SEARCH_TOOL],
        {},
    )
    add(
        "tool_call_string_args",
        "tool call with arguments as a JSON string (OpenAI wire format)",
        [
            {"role": "user", "content": "Weather in Oslo?"},
            {"role": "assistant", "content": "", "tool_calls": [tool_call("get_current_weather", '{"location": "Oslo"}')]},
            {"role": "tool", "content": "cold"},
        ],
        [WEATHER_TOOL],
        {},
    )
    add(
        "parallel_tool_calls",
        "two tool calls in one turn, then several tool responses in a row",
        [
            {"role": "user", "content": "Compare Paris and Rome weather."},
            {
                "role": "assistant",
                "content": "Let me check both.",
                "reasoning_content": "Need two lookups.",
                "tool_calls": [
                    tool_call("get_current_weather", {"location": "Paris"}, "c1"),
                    tool_call("get_current_weather", {"location": "Rome", "unit": "celsius"}, "c2"),
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "Paris: 18C"},
            {"role": "tool", "tool_call_id": "c2", "content": "Rome: 25C"},
            {"role": "tool", "tool_call_id": "c3", "content": "  extra  "},
        ],
        [WEATHER_TOOL],
        {},
    )
    add(
        "multi_step_tools",
        "tool loop: call, response, call, response, answer, then a new user query",
        [
            SYSTEM,
            {"role": "user", "content": "Plan a trip."},
            {"role": "assistant", "content": "<think>first weather</think>", "tool_calls": [tool_call("get_current_weather", {"location": "Nice"})]},
            {"role": "tool", "content": "sunny"},
            {"role": "assistant", "content": "", "reasoning_content": "then search", "tool_calls": [tool_call("web_search", {"query": "Nice hotels"}, wrap=False)]},
            {"role": "tool", "content": "Hotel A, Hotel B"},
            {"role": "assistant", "content": "Go to Nice, stay at Hotel A.", "reasoning_content": "done"},
            {"role": "user", "content": "Thanks! Anything else?"},
        ],
        [WEATHER_TOOL, SEARCH_TOOL],
        {},
    )
    add(
        "tool_response_first",
        "a tool message right after the user (no assistant call in between)",
        [USER1, {"role": "tool", "content": "orphan"}],
        None,
        {},
    )
    add(
        "image_video_parts",
        "user content as parts: image, text, video, image_url",
        [
            {
                "role": "user",
                "content": [
                    {"type": "image", "image": "file:///a.png"},
                    {"type": "text", "text": "Describe this image"},
                    {"type": "video", "video": "file:///b.mp4"},
                    {"type": "image_url", "image_url": {"url": "http://x/y.jpg"}},
                    {"type": "text", "text": " and this video."},
                ],
            }
        ],
        None,
        {},
    )
    add(
        "image_video_vision_id",
        "vision parts across turns with add_vision_id=True",
        [
            {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is it?"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "A cat."}]},
            {"role": "user", "content": [{"type": "video"}, {"type": "image"}, {"type": "text", "text": "And these?"}]},
        ],
        None,
        {"add_vision_id": True},
    )
    add(
        "text_parts_system",
        "system and user given as text parts",
        [
            {"role": "system", "content": [{"type": "text", "text": "  Be terse.  "}]},
            {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": " there"}]},
        ],
        [WEATHER_TOOL],
        {},
    )
    add(
        "string_parts",
        "content list of plain strings (one contains the word image)",
        [{"role": "user", "content": ["an image of a dog"]}],
        None,
        {},
    )
    add(
        "unicode_and_braces",
        "unicode, emoji ZWJ, whitespace edges and literal Jinja syntax in content",
        [
            {"role": "system", "content": "\n  Système: réponds en français. 🇫🇷  \n"},
            {"role": "user", "content": "{{ 1 + 1 }} {% if x %} 👩‍👩‍👧 中文 \t tab\r\nCRLF"},
            {"role": "assistant", "content": "  {# not a comment #}  "},
            {"role": "user", "content": "<tool_response>\nlooks like a tool response\n</tool_response>"},
        ],
        None,
        {},
    )
    add(
        "user_tool_response_lookalike_last",
        "the last user turn looks like a tool response, an earlier one is a real query",
        [
            USER1,
            {"role": "assistant", "content": "Paris", "reasoning_content": "easy"},
            {"role": "user", "content": "<tool_response>\n42\n</tool_response>"},
            {"role": "assistant", "content": "Got 42.", "reasoning_content": "tool said 42"},
        ],
        None,
        {},
    )
    add(
        "assistant_none_content_calls",
        "assistant with content null and a tool call without the function wrapper",
        [
            {"role": "user", "content": "calc 2+2"},
            {"role": "assistant", "content": None, "tool_calls": [tool_call("calculator", {"expr": "2+2"}, wrap=False)]},
            {"role": "tool", "content": "4"},
        ],
        [FLAT_TOOL],
        {},
    )
    # Cases where templates raise.
    add("no_user_query", "only a system message: no user query", [SYSTEM], None, {})
    add("no_messages", "empty message list", [], None, {})
    add(
        "system_not_first",
        "a system message after the first turn",
        [USER1, {"role": "system", "content": "late system"}],
        None,
        {},
    )
    add("unknown_role", "a message with an unknown role", [USER1, {"role": "critic", "content": "meh"}], None, {})
    add(
        "system_with_image",
        "an image inside the system message",
        [{"role": "system", "content": [{"type": "image"}]}, USER1],
        None,
        {},
    )
    add("bad_content_part", "a content part of unknown type", [{"role": "user", "content": [{"type": "audio"}]}], None, {})
    add("integer_content", "content that is a number", [{"role": "user", "content": 7}], None, {})
    return s


def flag_sets(template_name: str, source: str):
    sets = [({}, True), ({}, False)]
    if "enable_thinking" in source:
        sets += [({"enable_thinking": True}, True), ({"enable_thinking": False}, True), ({"enable_thinking": False}, False)]
    if "preserve_thinking" in source:
        sets += [({"preserve_thinking": True}, True), ({"preserve_thinking": False}, True), ({"preserve_thinking": True, "enable_thinking": False}, True)]
    return sets



# ---------------------------------------------------------------------------------------------
# Feature cases: small templates exercising one Jinja feature each, rendered by the same
# environment transformers compiles chat templates with. They pin the engine's semantics beyond
# what the Qwen templates happen to use.

FEATURE_CONTEXT = {
    "d": {"a": 1, "b": "two", "c": [1, 2], "n": None},
    "users": [
        {"name": "bob", "age": 31, "active": True},
        {"name": "amy", "age": 25, "active": False},
        {"name": "cy", "age": 40, "active": True},
    ],
    "u": {"é": "ü", "emoji": "👩‍👩‍👧", "ctl": "\x01\x1f\x7f", "zw": "a\u200bb"},
    "nums": [3, 1.5, -2, 0],
    "x": None,
    "t": True,
}

FEATURES = [
    # whitespace control, trim_blocks / lstrip_blocks, comments, raw, newlines
    ("ws_trim_blocks", "a\n{% if true %}\nb\n{% endif %}\nc"),
    ("ws_lstrip_blocks", "  {% if true %}x{% endif %}  \n  y\n    {% if true %}\n z\n    {% endif %}"),
    ("ws_lstrip_not_vars", "{{ 'a' }}\n  {{ 'b' }}\n\t{{ 'c' }}"),
    ("ws_minus", "a  \n {%- if true -%} \n b \n {%- endif -%}  \n c"),
    ("ws_minus_vars", "a \n {{- 'b' -}} \n c {{ 'd' -}}\n\n e"),
    ("ws_plus", "  {%+ if true %}x{% endif +%}\ny\n  {%+ if true +%}\nz{% endif %}"),
    ("ws_comments", "a {# c #} b\n  {# own line #}\nc {#- strip -#} d\n{# a\nmulti-line comment #}\ne"),
    ("ws_raw", "{% raw %}{{ x }} {% if %}{% endraw %}|{%- raw -%}  {{ y }}  {%- endraw -%}|"),
    ("ws_trailing_newline", "x\n"),
    ("ws_two_trailing_newlines", "x\n\n"),
    ("ws_crlf", "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\nc\r\n"),
    ("ws_loop_lines", "{%- for x in [1, 2] %}\n  {{ x }}\n{%- endfor %}\n"),
    ("ws_block_end_newline_only_one", "{% if true %}\n\nx{% endif %}"),
    ("ws_tab_lstrip", "\t \t{% if true %}x{% endif %}"),
    ("ws_text_before_tag_kept", "text {% if true %}x{% endif %}"),
    ("ws_lstrip_after_var_line", "{{ 'a' }}\n  {% if true %}x{% endif %}"),
    ("ws_lstrip_after_comment", "{# c #}\n  {% if true %}x{% endif %}"),
    ("ws_no_lstrip_mid_line", "{% if true %}  {% if true %}x{% endif %}{% endif %}"),
    ("ws_braces_in_strings", "{{ '}}' }}{% if '%}' %}y{% endif %}{{ '{{' ~ '{%' }} { a } {x}"),
    ("ws_minus_eats_newlines", "a\n\n  {{- 'b' }}\n\n{#- c -#}\n\nd"),
    # literals and operators
    ("lit_strings", "{{ 'a\\nb\\t\\x41\\u00e9\\'' }}|{{ \"q\\\"uote\" }}|{{ 'a' 'b' \"c\" }}|{{ 'back\\\\slash' }}|{{ '\\z' }}"),
    ("lit_numbers", "{{ 1_000 }} {{ 1.5e3 }} {{ 2E-3 }} {{ 0.1 }} {{ 10 }}"),
    ("lit_list_dict_repr", "{{ {'a': 1, 'b': [true, none, 'x'], 'c': 1.5, 'd': {}} }}|{{ [] }}|{{ [[1], ['it\\'s']] }}"),
    ("lit_tuple_repr", "{{ (1, 2) }}|{{ (1,) }}|{{ () }}|{% set t = 1, 'a' %}{{ t }}"),
    ("lit_str_repr", "{{ ['it\\'s', 'say \"hi\"', 'both \\' \"', '\\n\\t\\\\', 'é', u.zw, u.ctl, u.emoji] }}"),
    ("op_arith", "{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % -3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 7 / 2 }} {{ 1.5 + 1 }} {{ 10 / 5 }} {{ true + 1 }}"),
    ("op_float_repr", "{{ -7.5 // 2 }} {{ 7.5 % 2 }} {{ 0.1 + 0.2 }} {{ 1e100 }} {{ 1e-5 }} {{ 0.0001 }} {{ 123456789012345678.0 }} {{ 1e16 }} {{ 1e15 }} {{ -0.0 }} {{ 2.5 * 4 }}"),
    ("op_concat", "{{ 1 ~ 'a' ~ none ~ true ~ undefined_var ~ 1.0 ~ [1] }}"),
    ("op_repeat", "{{ 'ab' * 3 }} {{ [1] * 2 }} {{ [1, 2] + [3] }} {{ 2 * 'x' }} {{ 'x' * 0 }}|"),
    ("op_compare", "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ true == 1 }} {{ none == none }} {{ 'a' != 'a' }} {{ 2 >= 2 }} {{ 'é' > 'z' }}"),
    ("op_in", "{{ 'a' in 'cat' }} {{ 1 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'x' not in 'abc' }} {{ 'x' in undefined_var }} {{ 1.0 in [1] }} {{ 'a' in d }} {{ [1] in [[1]] }}"),
    ("op_and_or_values", "{{ 0 or 'b' }} {{ 1 and 'c' }} {{ '' and 'd' }}|{{ none or none }} {{ [] or {} }} {{ 'x' or undefined_var.y }}"),
    ("op_not_precedence", "{{ not x is defined }} {{ not 1 == 2 }} {{ not none }} {{ not not 'a' }} {{ not undefined_var }}"),
    ("op_filter_precedence", "{{ '  a ' | trim + 'b' }} {{ -1 | abs }} {{ -2 ** 2 }} {{ 'ab' ~ 'cd' | upper }} {{ 'x' ~ 1 + 2 }}"),
    ("e_filter_binds_tighter", "{{ 1 + 2 | string }}"),
    ("op_condexpr", "{{ 'y' if x else 'n' }}|{{ 'y' if x }}|{{ 'a' if t else 'b' if x else 'c' }}|{{ ('p' if t else 'q') ~ '!' }}"),
    ("op_slice", "{{ 'hello'[1:3] }} {{ 'hello'[::-1] }} {{ [1, 2, 3, 4][1:] }} {{ [1, 2, 3, 4][-2:] }} {{ 'héllo'[1] }} {{ [1, 2, 3][::2] }} {{ 'abc'[5:] }}| {{ [1, 2, 3, 4][3:0:-1] }} {{ 'abcdef'[-1:-4:-2] }} {{ [1, 2][:-5] }}"),
    ("op_index", "{{ [1, 2, 3][-1] }} {{ 'abc'[0] }} {{ {'a': 1}['a'] }} {{ [1][5] }}|{{ d['zz'] }}|{{ d.c.1 }} {{ d['c'][0] }} {{ users[1].name }} {{ users[0]['age'] }}"),
    ("op_unary", "{{ -(1 + 2) }} {{ +3 }} {{ -1.5 }} {{ --2 }}"),
    # names, attributes, undefined
    ("attr_basic", "{{ d.a }}|{{ d.missing }}|{{ d['a'] }}|{{ d.get('missing', 'dflt') }}|{{ d.get('a') }}|{{ d.get('zz') }}|{{ d.n }}|{{ none.x }}|{{ 'abc'.nope }}|"),
    ("attr_defined", "{{ d.missing is defined }} {{ d.a is defined }} {{ undefined_var is undefined }} {{ d.n is none }} {{ d.n is defined }} {{ x is defined }}"),
    ("attr_undefined_print", "[{{ undefined_var }}][{{ d.missing }}][{{ undefined_var | string }}][{{ undefined_var | length }}][{{ undefined_var is string }}]"),
    ("attr_loop_over_undefined", "{% for i in undefined_var %}x{% else %}empty{% endfor %}|{% for i in d.missing %}y{% endfor %}|"),
    ("lit_trailing_commas", "{{ [1, 2,] }}|{{ {'a': 1,} }}|{{ (1, 2,) }}"),
    ("lit_none_print", "{{ none }}|{{ x }}|{{ [0.1, 1e-7, 2.0] }}|{{ 'a' ~ 1.0 }}"),
    ("attr_namespace_missing", "{% set ns = namespace(a=1) %}{{ ns.b is defined }}{{ ns.a is defined }}[{{ ns.b }}]"),
    ("if_elif_else", "{% for v in [1, 2, 3] %}{% if v == 1 %}a{% elif v == 2 %}b{% else %}c{% endif %}{% endfor %}"),
    # loops
    ("loop_vars", "{% for x in 'abc' %}{{ loop.index0 }}{{ loop.index }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }}{{ loop.revindex0 }}|{% endfor %}"),
    ("loop_prev_next", "{% for x in [1, 2, 3] %}{{ loop.previtem }}-{{ loop.nextitem }}-{{ loop.previtem is defined }};{% endfor %}"),
    ("loop_cycle", "{% for x in range(4) %}{{ loop.cycle('a', 'b', 'c') }}{% endfor %}"),
    ("loop_else", "{% for x in [] %}x{% else %}empty{% endfor %}|{% for x in [1] %}one{% else %}no{% endfor %}"),
    ("loop_filter", "{% for x in range(10) if x % 3 == 0 %}{{ x }}{{ loop.last }}{{ loop.length }},{% endfor %}"),
    ("loop_break_continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
    ("loop_scoping", "{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = x + 10 %}{{ x }};{% endfor %}{{ x }}"),
    ("loop_if_no_scope", "{% if true %}{% set y = 5 %}{% endif %}{{ y }}"),
    ("loop_namespace", "{% set ns = namespace(c=0, s='') %}{% for i in range(3) %}{% set ns.c = ns.c + i %}{% set ns.s = ns.s ~ i %}{% endfor %}{{ ns.c }} {{ ns.s }}"),
    ("loop_nested", "{% for a in [1, 2] %}{% for b in [3, 4] %}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{{ loop.index }}|{% endfor %}"),
    ("loop_unpack", "{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}|{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}|{% for k, v in d | items %}{{ k }},{% endfor %}"),
    ("loop_dict_keys", "{% for k in d %}{{ k }},{% endfor %}|{% for c in 'hé' %}[{{ c }}]{% endfor %}"),
    ("loop_var_after_loop", "{% set item = 'outer' %}{% for item in [1, 2] %}{{ item }}{% endfor %}{{ item }}"),
    ("set_tuple", "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c, e = [3, 4] %}{{ c }}{{ e }}"),
    ("set_block", "{% set x %}  hello {{ 1 }}\n{% endset %}[{{ x }}]{% set y | upper | trim %} abc {% endset %}[{{ y }}]"),
    ("set_overrides_context", "{{ t }}{% set t = 'local' %}{{ t }}"),
    # macros
    ("macro_args", "{% macro m(a, b=2, c='x') %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ m(1) }}|{{ m(1, 3) }}|{{ m(1, c='z') }}|{{ m(b=5, a=0) }}"),
    ("macro_sees_current_globals", "{% macro m() %}{{ v }}{% endmacro %}{% set v = 1 %}{{ m() }}{% set v = 2 %}{{ m() }}"),
    ("macro_not_loop_vars", "{% macro m() %}[{{ i }}]{% endmacro %}{% for i in [1] %}{{ m() }}{% endfor %}"),
    ("macro_whitespace", "{% macro m(x) %}\n  {{ x }}\n{% endmacro %}<{{ m(1) }}>\n{%- macro n(x) -%}\n  {{ x }}\n{%- endmacro -%}\n<{{ n(2) }}>"),
    ("macro_recursive", "{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(5) }}"),
    ("macro_missing_param", "{% macro m(a) %}{{ a is defined }}{% endmacro %}{{ m() }}"),
    ("macro_result_is_string", "{% macro m() %} 1 {% endmacro %}{{ m() | trim }}{{ m() is string }}{{ m() | length }}"),
    ("macro_default_refers_param", "{% macro m(a, b=a ~ '!') %}{{ b }}{% endmacro %}{{ m('hi') }}"),
    ("macro_mutates_namespace", "{% set ns = namespace(n=0) %}{% macro bump() %}{% set ns.n = ns.n + 1 %}{% endmacro %}{{ bump() }}{{ bump() }}{{ ns.n }}"),
    # filters
    ("f_length", "{{ 'héllo' | length }} {{ [1, 2] | length }} {{ {'a': 1} | count }} {{ undefined_var | length }} {{ u.emoji | length }}"),
    ("f_trim", "{{ '  a b \\n' | trim }}|{{ 'xxaxx' | trim('x') }}|{{ u.zw | trim }}|{{ '\\u3000 x \\u00a0' | trim }}|"),
    ("f_tojson_default", "{{ d | tojson }}|{{ users | tojson }}|{{ u | tojson }}|{{ 'é<>&\\'\"\\n\\t\\x08\\x0c' | tojson }}"),
    ("f_tojson_indent", "{{ d | tojson(indent=2) }}|{{ {'a': [], 'b': {}, 'c': [1]} | tojson(indent=0) }}|{{ [1, [2]] | tojson(indent='\\t') }}"),
    ("f_tojson_options", "{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}|{{ d | tojson(separators=(',', ':')) }}|{{ u | tojson(ensure_ascii=true) }}"),
    ("f_tojson_numbers", "{{ [1.0, 2.5e-8, 1e22, -0.0, 0.1, 100, -5, 1e16, 123.456] | tojson }}"),
    ("f_string", "{{ 1.0 | string }} {{ none | string }} {{ [1, 'a'] | string }} {{ true | string }} {{ d | string }}"),
    ("f_items_list", "{{ d | items | list }}|{{ 'abc' | list }}|{{ d | list }}|{{ undefined_var | items | list }}"),
    ("f_first_last", "{{ [3, 1] | first }}{{ [3, 1] | last }}{{ 'xyz' | first }}{{ 'xyz' | last }}{{ d | first }}{{ d | last }}|{{ [] | first }}|"),
    ("f_join", "{{ [1, 'a', none] | join(', ') }}|{{ users | join(',', attribute='name') }}|{{ 'abc' | join('-') }}|{{ [] | join }}"),
    ("f_default", "{{ undefined_var | default('d') }}|{{ '' | default('e', true) }}|{{ none | default('n') }}|{{ 0 | d('z', boolean=true) }}|{{ d.missing | default }}|"),
    ("f_case", "{{ 'hello World' | upper }} {{ 'ABC' | lower }} {{ 'hELLO wORLD' | capitalize }} {{ 'hello big-world 2nd' | title }}"),
    ("f_replace", "{{ 'aaa' | replace('a', 'b', 2) }} {{ 'aaa' | replace('a', 'bc') }} {{ 'abc' | replace('', '-') }} {{ 12 | replace('1', 'x') }}"),
    ("f_select", "{{ users | selectattr('active') | map(attribute='name') | list }}|{{ users | rejectattr('age', 'gt', 30) | map(attribute='name') | join(',') }}|{{ [1, 2, 3, 4] | select('odd') | list }}|{{ [1, 2, 3, 4] | reject('even') | list }}|{{ [0, 1, '', 'a'] | select | list }}"),
    ("f_map", "{{ ['a', 'b'] | map('upper') | list }}|{{ users | map(attribute='missing', default='?') | list }}|{{ users | selectattr('name', 'equalto', 'bob') | list | length }}|{{ [' a', 'b '] | map('trim') | join }}"),
    ("f_sort", "{{ [3, 1, 2] | sort }} {{ ['b', 'A', 'a'] | sort }} {{ ['b', 'A', 'a'] | sort(case_sensitive=true) }} {{ users | sort(attribute='age', reverse=true) | map(attribute='name') | list }}"),
    ("f_aggregate", "{{ [1, 2, 1, 'A', 'a'] | unique | list }} {{ [1, 2, 3] | reverse | list }} {{ 'abc' | reverse }} {{ [3, 1, 2] | min }} {{ [3, 1, 2] | max }} {{ [1, 2, 3] | sum }} {{ users | sum(attribute='age') }} {{ nums | sum }}"),
    ("f_numbers", "{{ '42' | int }} {{ '4.7' | int }} {{ 'x' | int(7) }} {{ 3.9 | int }} {{ '2.5' | float }} {{ 'x' | float }} {{ -3 | abs }} {{ 2.567 | round(2) }} {{ 2.5 | round }} {{ 3.5 | round }} {{ 2.1 | round(method='ceil') }} {{ 7 | round }}"),
    ("f_indent", "{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'a\\n\\nb' | indent('>', blank=true) }}"),
    ("f_dictsort_batch", "{{ {'b': 1, 'A': 2, 'a': 3} | dictsort }}|{{ [1, 2, 3, 4, 5] | batch(2) | list }}|{{ 'a b  c' | wordcount }}"),
    ("f_safe_markup_add", "{{ ('<a>' | safe) + '<b>' }}|{% set s = '<x>' | safe %}{{ '<y>' + s }}|{{ ('<a>' | safe) ~ '<b>' }}|{{ '<c>' | safe }}"),
    ("f_escape", "{{ '<&>\"\\'' | e }}|{{ '<p>' | escape | safe }}"),
    ("f_tojson_safe_set", "{% set v = d.c | tojson | safe if d.c is sequence else d.c | string %}{{ v }}|{% set w = 5 | tojson | safe if false else 5 | string %}{{ w }}"),
    # tests
    ("t_types", "{{ 1 is number }}{{ true is number }}{{ 1.5 is float }}{{ 1 is integer }}{{ true is integer }}{{ 'a' is string }}{{ d is mapping }}{{ [1] is sequence }}{{ d is sequence }}{{ 'a' is iterable }}{{ none is none }}{{ undefined_var is sequence }}{{ none is iterable }}{{ d is iterable }}{{ 1 is iterable }}{{ users is mapping }}"),
    ("t_bools", "{{ true is true }}{{ 1 is true }}{{ false is false }}{{ 0 is false }}{{ true is boolean }}{{ none is boolean }}"),
    ("t_compare", "{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(4) }}{{ 'a' is eq 'a' }}{{ 2 is gt 1 }}{{ 2 is lt(1) }}{{ 1 is in [1, 2] }}{{ 2 is ne 2 }}{{ 2 is ge 2 }}{{ 'abc' is lower }}{{ 'ABC' is upper }}{{ 2 is sameas 2 }}"),
    ("t_meta", "{{ 'upper' is filter }}{{ 'nope' is filter }}{{ 'odd' is test }}{{ x is sameas none }}{{ range is callable }}{{ d is callable }}{{ 'a' is not string }}"),
    # Python methods
    ("m_split", "{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ '  a  b  '.rsplit(None, 1) }} {{ ' a b c '.split(None, 1) }} {{ ''.split() }} {{ ''.split(',') }} {{ 'a</think>b</think>c'.split('</think>') }}"),
    ("m_strip", "{{ 'xxhixx'.strip('x') }}|{{ '\\n\\nhi\\n'.lstrip('\\n') }}|{{ 'hi  '.rstrip() }}|{{ '\\u3000hi\\u00a0'.strip() }}|{{ 'abcba'.strip('ab') }}|"),
    ("m_affix", "{{ 'hello'.startswith('he') }}{{ 'hello'.endswith(('x', 'lo')) }}{{ 'hello'.startswith('l', 2) }}{{ 'hello'.endswith('') }}{{ 'héllo'.startswith('hé') }}"),
    ("m_misc_str", "{{ 'Hello'.upper() }}{{ 'Hello'.lower() }}{{ 'a-b'.replace('-', '+') }}{{ 'hello'.find('l') }}{{ 'héllo'.find('l') }}{{ 'hello'.rfind('l') }}{{ 'hello'.find('z') }}{{ 'hello'.count('l') }}{{ ','.join(['a', 'b']) }}"),
    ("m_splitlines_title", "{{ 'a\\nb\\r\\nc\\n'.splitlines() }} {{ 'Hello wORLD'.title() }} {{ 'hello'.capitalize() }} {{ '123'.isdigit() }} {{ 'abc'.isalpha() }} {{ ' '.isspace() }} {{ ''.isdigit() }}"),
    ("m_dict_list", "{{ d.keys() | list }} {{ d.values() | list }} {{ d.items() | list }} {{ [1, 2, 1].count(1) }} {{ [1, 2].index(2) }}"),
    # globals
    ("g_range", "{{ range(3) | list }} {{ range(1, 7, 2) | list }} {{ range(5, 0, -2) | list }} {{ range(0) | list }}"),
    ("g_namespace_dict", "{{ namespace(a=1).a }} {{ dict(a=1, b='x') }} {% set ns = namespace(d) %}{{ ns.b }}"),
    # errors: runtime
    ("e_add_int_str", "{{ 1 + 'a' }}"),
    ("e_add_str_int", "{{ 'a' + 1 }}"),
    ("e_undefined_attr_chain", "{{ undefined_var.y.z }}"),
    ("e_undefined_attr_of_missing", "{{ d.missing.x }}"),
    ("e_compare_types", "{{ 1 < 'a' }}"),
    ("e_none_plus", "{{ none + 1 }}"),
    ("e_undefined_plus", "{{ undefined_var + 1 }}"),
    ("e_undefined_call", "{{ undefined_var() }}"),
    ("e_div_zero", "{{ 1 / 0 }}"),
    ("e_iterate_int", "{% for i in 5 %}{% endfor %}"),
    ("e_tojson_undefined", "{{ undefined_var | tojson }}"),
    ("e_items_non_mapping", "{{ 'a' | items | list }}"),
    ("e_unsafe_append", "{{ d.c.append(3) }}"),
    ("e_unsafe_update", "{{ d.update({}) }}"),
    ("e_raise", "a{{ raise_exception('boom: ' ~ d.a) }}"),
    ("e_raise_in_macro", "{% macro m() %}{{ raise_exception('inside') }}{% endmacro %}{{ m() }}"),
    ("e_set_attr_non_namespace", "{% set d.a = 1 %}"),
    ("e_unpack", "{% for a, b in [[1, 2, 3]] %}{% endfor %}"),
    ("e_in_string_int", "{{ 1 in 'abc' }}"),
    ("e_none_iter", "{{ 'a' in none }}"),
    ("e_len_int", "{{ 5 | length }}"),
    ("e_call_string", "{{ 'a'() }}"),
    ("e_big_range", "{{ range(1000000) | length }}"),
    # errors: syntax
    ("soft_unknown_filter_untaken_if", "{% if false %}{{ x | no_such_filter }}{% endif %}"),
    ("s_unknown_test", "{{ x is no_such_test }}"),
    ("s_unknown_filter_in_loop_in_if", "{% if false %}{% for a in [1] %}{{ a | no_such_filter }}{% endfor %}{% endif %}"),
    ("s_unknown_filter_top", "{{ x | no_such_filter }}"),
    ("e_unknown_filter_reached_in_if", "{% if true %}{{ x | no_such_filter }}{% endif %}"),
    ("e_unknown_filter_reached_in_condexpr", "{{ (x | no_such_filter) if true else 1 }}"),
    ("soft_unknown_filter_in_condexpr_untaken", "{{ 1 if true else (x | no_such_filter) }}"),
    ("s_if_no_expr", "{% if %}x{% endif %}"),
    ("s_stray_endif", "x{% endif %}"),
    ("s_dangling_op", "{{ 1 + }}"),
    ("s_missing_endfor", "{% for x in y %}x"),
    ("s_unknown_tag", "{% frobnicate %}"),
    ("s_unterminated_string", "{{ 'abc }}"),
    ("s_unclosed_var", "{{ x "),
    ("s_unclosed_comment", "{# x "),
    ("s_bad_bracket", "{{ (1 ] }}"),
]


def feature_cases():
    compiled_env = _compile_jinja_template("").environment
    cases = []
    for name, source in FEATURES:
        case = {"id": name, "template_source": source, "context": FEATURE_CONTEXT}
        try:
            case["expected"] = compiled_env.from_string(source).render(**copy.deepcopy(FEATURE_CONTEXT))
        except Exception as e:  # noqa: BLE001
            case["error"] = {
                "type": type(e).__name__,
                "message": str(e),
                "raised": type(e) is jinja2.exceptions.TemplateError,
                "syntax": isinstance(e, jinja2.exceptions.TemplateSyntaxError),
            }
        cases.append(case)
    return cases

def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    templates = {}
    for name, path in TEMPLATE_SOURCES.items():
        text = path.read_text(encoding="utf-8")
        (OUT / name).write_text(text, encoding="utf-8", newline="")
        templates[name] = text
    base = templates[QWEN36_FROM]
    assert base.count(QWEN36_OLD) == 1, "Qwen3.6 derivation anchor not found exactly once"
    templates["qwen3.6.jinja"] = base.replace(QWEN36_OLD, QWEN36_NEW)
    (OUT / "qwen3.6.jinja").write_text(templates["qwen3.6.jinja"], encoding="utf-8", newline="")

    with tempfile.TemporaryDirectory() as tmp:
        tok = load_tokenizer(Path(tmp))
    special = dict(tok.special_tokens_map)

    cases = []
    counts = {"ok": 0, "error": 0}
    for tname, source in templates.items():
        compiled = _compile_jinja_template(source)
        for sname, desc, messages, tools, extra in scenarios():
            for flags, agp in flag_sets(tname, source):
                kwargs = {**extra, **flags}
                case_id = f"{tname}/{sname}/agp={int(agp)}" + "".join(f"/{k}={v}" for k, v in sorted(flags.items()))
                context = {**special, **kwargs}
                context.update(
                    messages=copy.deepcopy(messages), tools=copy.deepcopy(tools), documents=None, add_generation_prompt=agp
                )
                case = {"id": case_id, "template": tname, "description": desc, "context": context}
                try:
                    if not messages:
                        # apply_chat_template itself fails on an empty list (conversation[0]) before
                        # the template runs; render the template directly to test its own check.
                        case["reference"] = "template.render"
                        out = compiled.render(**copy.deepcopy(context))
                        case["expected"] = out
                        counts["ok"] += 1
                        cases.append(case)
                        continue
                    out = tok.apply_chat_template(
                        copy.deepcopy(messages),
                        tools=copy.deepcopy(tools),
                        chat_template=source,
                        tokenize=False,
                        add_generation_prompt=agp,
                        **copy.deepcopy(kwargs),
                    )
                    case["expected"] = out
                    again = compiled.render(**copy.deepcopy(context))
                    assert again == out, f"{case_id}: recorded context does not reproduce apply_chat_template"
                    counts["ok"] += 1
                except Exception as e:  # noqa: BLE001 -- every failure kind is a parity datum
                    if isinstance(e, AssertionError):
                        raise
                    case["error"] = {
                        "type": type(e).__name__,
                        "message": str(e),
                        # raise_exception() raises exactly jinja2.exceptions.TemplateError
                        "raised": type(e) is jinja2.exceptions.TemplateError,
                    }
                    counts["error"] += 1
                cases.append(case)

    with open(OUT / "cases.jsonl", "w", encoding="utf-8", newline="\n") as f:
        for c in cases:
            f.write(json.dumps(c, ensure_ascii=False) + "\n")
    features = feature_cases()
    with open(OUT / "jinja_feature_cases.jsonl", "w", encoding="utf-8", newline="\n") as f:
        for c in features:
            f.write(json.dumps(c, ensure_ascii=False) + "\n")
    print(f"wrote {len(features)} feature cases to {OUT / 'jinja_feature_cases.jsonl'}")
    print(
        f"wrote {len(cases)} cases ({counts['ok']} rendered, {counts['error']} errors) for {len(templates)} templates "
        f"to {OUT / 'cases.jsonl'} (transformers {transformers.__version__}, jinja2 {jinja2.__version__})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
