"""The trained canary model (tests/data/models/canary, made by tools/reference/make_canary_model.py) served
by fp4serve in BF16 and in NVFP4 (ModelOpt): `fp4serve canary` passes on both, and fails once the
fault-injection switch zeroes the GDN state between steps -- the proof that the canary catches garbage --
or when the vision tower is dead (its image checks: the colour of a solid-colour image).
The canary server runs on FP4SERVE_TEST_DEVICE (conftest.py): scripts/gpu-check.sh runs the pass and the
fault-switch tests with cuda (-k "canary_passes or gdn_state_is_corrupted": the others need the openai
package, which the GPU machine lacks).
The model directory is assembled the way a download looks: the unpacked checkpoint plus the real
tokenizer (.cache/tokenizers/qwen3.5, installed by scripts/setup.sh) and the Qwen3.6 chat template."""
import json
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]
CANARY_DIR = ROOT / "tests" / "data" / "models" / "canary"
FORMATS = ("bf16", "nvfp4")
IMAGE_PAD_ID = 248056
N_CHECKS = 5  # canary_checks(): three text checks, two image checks


def conversations():
    return json.loads((CANARY_DIR / "conversations.json").read_text())["conversations"]


def reference_tokens():
    return json.loads((CANARY_DIR / "tokens.json").read_text())["conversations"]


@pytest.fixture(scope="module", params=FORMATS)
def canary_server(request, make_server, canary_model_dir, test_device):
    # On the device FP4SERVE_TEST_DEVICE names (conftest.py): the CPU in CI, the GPU in scripts/gpu-check.sh.
    fmt = request.param
    model = canary_model_dir(fmt)
    server = make_server("--model", str(model), "--reasoning-parser", "qwen3", "--enable-auto-tool-choice",
                         "--tool-call-parser", "qwen3_coder", "--enable-debug-endpoints", "--device", test_device)
    server.format = fmt
    yield server
    requests.post(server.url + "/debug/corrupt-gdn?on=0", timeout=10)


def run_canary(binary, server):
    r = subprocess.run([str(binary), "canary", server.url, "--concurrency", "4"], capture_output=True, text=True,
                       timeout=600)
    verdicts = [l for l in r.stdout.splitlines() if l.startswith(("PASS ", "FAIL "))]
    assert len(verdicts) == N_CHECKS * 2 * 2, r.stdout + r.stderr  # thinking off/on, alone/in a batch
    return r, verdicts


def test_prompts_render_to_the_reference_tokens(canary_server):
    # The model only knows the prompts transformers rendered; fp4serve must render the same ids.
    # /tokenize takes text parts only (400 for image_url parts), so the image conversations are left to
    # the chat route's checks: their answers below and the canary's image checks.
    refs = reference_tokens()
    assert len(refs) == len(conversations())
    for conv, ref in zip(conversations(), refs):
        if IMAGE_PAD_ID in ref["prompt"]:
            continue
        body = {"messages": conv["messages"], "add_generation_prompt": True,
                "chat_template_kwargs": {"enable_thinking": conv["enable_thinking"]}}
        if "tools" in conv:
            body["tools"] = conv["tools"]
        r = requests.post(canary_server.url + "/tokenize", json=body, timeout=30)
        assert r.status_code == 200, r.text
        assert r.json()["tokens"] == ref["prompt"], ref["name"]


def test_canary_passes(canary_server, fp4serve_binary):
    r, verdicts = run_canary(fp4serve_binary, canary_server)
    assert r.returncode == 0, r.stdout + r.stderr + canary_server.read_log()[-3000:]
    assert all(v.startswith("PASS ") for v in verdicts), r.stdout


def test_official_client_gets_the_answers_and_a_tool_call(canary_server):
    import openai
    client = openai.OpenAI(base_url=canary_server.url + "/v1", api_key="unused")
    for conv in conversations():
        resp = client.chat.completions.create(
            model=client.models.list().data[0].id, messages=conv["messages"], tools=conv.get("tools"),
            temperature=0, max_tokens=96, extra_body={"chat_template_kwargs": {"enable_thinking": conv["enable_thinking"]}})
        choice = resp.choices[0]
        completion = conv["completion"]
        if "tools" in conv:
            assert choice.finish_reason == "tool_calls", choice
            call = choice.message.tool_calls[0]
            assert call.function.name == "get_weather"
            assert json.loads(call.function.arguments) == {"city": "Paris"}
            continue
        assert choice.finish_reason == "stop", choice
        if conv["enable_thinking"]:
            # vLLM's qwen3 parser: reasoning before </think>, content after it, both unstripped.
            reasoning, _, answer = completion.partition("</think>")
            assert choice.message.reasoning_content == reasoning
            assert choice.message.content == answer
        else:
            assert choice.message.content == completion


def test_answers_are_unchanged_under_a_permissive_constraint(canary_server):
    # The grammar mask must leave the logits of the tokens it allows untouched: under a regex that
    # admits any text, greedy answers are the trained ones token for token (with thinking on, the
    # reasoning is unconstrained and the regex applies after </think>). A JSON schema could not
    # admit these plain-text answers, hence a regex.
    import openai
    client = openai.OpenAI(base_url=canary_server.url + "/v1", api_key="unused")
    for conv in conversations():
        if "tools" in conv:
            continue
        resp = client.chat.completions.create(
            model=client.models.list().data[0].id, messages=conv["messages"], temperature=0, max_tokens=96,
            extra_body={"chat_template_kwargs": {"enable_thinking": conv["enable_thinking"]},
                        "structured_outputs": {"regex": "[\\s\\S]*"}})
        choice = resp.choices[0]
        assert choice.finish_reason == "stop", choice
        reasoning, _, answer = conv["completion"].rpartition("</think>")
        assert choice.message.content == answer, conv["name"]
        if conv["enable_thinking"]:
            assert choice.message.reasoning_content == reasoning, conv["name"]


def test_canary_fails_when_the_gdn_state_is_corrupted(canary_server, fp4serve_binary):
    assert requests.post(canary_server.url + "/debug/corrupt-gdn?on=1", timeout=10).status_code == 200
    try:
        r, verdicts = run_canary(fp4serve_binary, canary_server)
    finally:
        requests.post(canary_server.url + "/debug/corrupt-gdn?on=0", timeout=10)
    assert r.returncode == 1, r.stdout
    failed = [v for v in verdicts if v.startswith("FAIL ")]
    assert any(v.startswith("FAIL capital-of-france") for v in failed), r.stdout
    assert any(v.startswith("FAIL 17x23") for v in failed), r.stdout


def zero_tensors(shard, names):
    """Zeroes the named tensors of a safetensors file in place (same dtype and size)."""
    with open(shard, "r+b") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        for name in names:
            begin, end = header[name]["data_offsets"]
            f.seek(8 + n + begin)
            f.write(bytes(end - begin))


def test_canary_image_checks_fail_with_a_dead_vision_tower(make_server, canary_model_dir, fp4serve_binary, tmp_path):
    # The merger's last projection zeroed: every image's rows are zero, whatever its colour. The text
    # checks still pass; the image checks cannot (one set of rows can name at most one of two colours).
    model = tmp_path / "canary-dead-tower"
    shutil.copytree(canary_model_dir("bf16"), model)
    names = ["model.visual.merger.linear_fc2.weight", "model.visual.merger.linear_fc2.bias"]
    index = json.loads((model / "model.safetensors.index.json").read_text())["weight_map"]
    for shard in {index[n] for n in names}:
        zero_tensors(model / shard, [n for n in names if index[n] == shard])
    server = make_server("--model", str(model), "--reasoning-parser", "qwen3")
    r, verdicts = run_canary(fp4serve_binary, server)
    assert r.returncode == 1, r.stdout
    failed = [v for v in verdicts if v.startswith("FAIL ")]
    assert failed and all(v.startswith("FAIL image-colour-") for v in failed), r.stdout
