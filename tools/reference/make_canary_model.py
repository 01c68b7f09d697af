#!/usr/bin/env python3
"""Trains the canary model and writes it as BF16 and NVFP4 (ModelOpt) checkpoints, packed as
tests/data/models/canary/canary-{bf16,nvfp4}.tar.xz.

  /path/to/reference-venv/bin/python tools/reference/make_canary_model.py [--out tests/data/models/canary]

The model (canary_model.py) answers the conversations of tests/data/models/canary/conversations.json
(fp4serve canary's questions, thinking off and on, and one tool call) through the real Qwen3.6 chat
template and the real tokenizer (.cache/tokenizers/qwen3.5, installed by scripts/setup.sh). Both
checkpoints are checked here with transformers before they are packed: greedy decoding of every
conversation gives exactly its completion (BF16: from_pretrained in bf16; NVFP4: ModelOpt's weights
dequantized, bf16 activations). The archives hold no tokenizer: the tests add tokenizer.json,
tokenizer_config.json and chat_template.jinja from the same sources, as a downloaded model has them.
Both also get an MTP block trained to predict the model's own next tokens (add_canary_mtp.py).
Deterministic: fixed seeds, CPU, one thread.
"""
import argparse
import io
import json
import os
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)

import torch  # noqa: E402

from canary_model import (CANARY_GENERATION_CONFIG, CompactHead, IM_END_ID, REAL_VOCAB_SIZE,  # noqa: E402
                          build_model, load_conversations, render, train)
from checkpoint_writer import save_checkpoint, write_json  # noqa: E402

MODEL_SEED = 391
MIN_MARGIN = 6.0      # fp32 logits; what is left after bf16 rounding and 4-bit experts must stay > 0
MAX_STEPS = 600
CALIB_SEED = 777
TOKENIZER_DIR = os.path.join(ROOT, ".cache", "tokenizers", "qwen3.5")
TEMPLATE = os.path.join(ROOT, "tests", "data", "chat_templates", "qwen3.6.jinja")


def export_bf16(model, out_dir):
    from export_bf16 import bf16_release_tensors
    os.makedirs(out_dir, exist_ok=True)
    save_checkpoint(bf16_release_tensors(model), out_dir, n_shards=2)
    d = model.config.to_dict()
    d["dtype"] = "bfloat16"
    d["text_config"]["dtype"] = "bfloat16"
    for k in ("_attn_implementation", "_experts_implementation"):
        d["text_config"].pop(k, None)
    write_json(os.path.join(out_dir, "config.json"), d)
    write_json(os.path.join(out_dir, "generation_config.json"), CANARY_GENERATION_CONFIG)


@torch.no_grad()
def greedy_completion(model, prompt, n_max):
    ids = torch.tensor([prompt])
    out = model(input_ids=ids, use_cache=True)
    tokens = []
    for _ in range(n_max):
        tok = int(torch.argmax(out.logits[0, -1]))
        tokens.append(tok)
        if tok == IM_END_ID:
            break
        out = model(input_ids=torch.tensor([[tok]]), past_key_values=out.past_key_values, use_cache=True)
    return tokens


def check_answers(model, examples, what):
    for (prompt, completion), name in examples:
        got = greedy_completion(model, prompt, len(completion) + 4)
        if got != completion:
            raise RuntimeError(f"{what}: {name}: greedy gives {got}, expected {completion}")
    print(f"[canary] {what}: all {len(examples)} conversations answered exactly", flush=True)


def check_bf16(model_dir, examples):
    from transformers import Qwen3_5MoeForConditionalGeneration
    model = Qwen3_5MoeForConditionalGeneration.from_pretrained(
        model_dir, dtype=torch.bfloat16, attn_implementation="eager", experts_implementation="eager").eval()
    check_answers(model, examples, "BF16 checkpoint (transformers, bf16)")


def check_nvfp4(model_dir, examples):
    from dequant import load_dense_text_state, read_json
    from goldens import build_causal_lm
    cfg = read_json(os.path.join(model_dir, "config.json"))["text_config"]
    model = build_causal_lm(cfg, load_dense_text_state(model_dir), torch.bfloat16)
    check_answers(model, examples, "NVFP4 checkpoint (ModelOpt weights dequantized, bf16)")


def pack(src_dir, archive):
    """A reproducible .tar.xz: sorted names, no owners, mtime 0."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for fn in sorted(os.listdir(src_dir)):
            info = tar.gettarinfo(os.path.join(src_dir, fn), arcname=fn)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            info.mode = 0o644
            with open(os.path.join(src_dir, fn), "rb") as f:
                tar.addfile(info, f)
    import lzma
    with open(archive, "wb") as f:
        f.write(lzma.compress(buf.getvalue(), preset=9 | lzma.PRESET_EXTREME))
    print(f"[canary] {archive}: {os.path.getsize(archive) / 1e3:.0f} kB", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "models", "canary"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    with open(TEMPLATE) as f:
        template = f.read()
    convs = load_conversations(os.path.join(args.out, "conversations.json"))
    rendered = [render(tokenizer, template, c) for c in convs]
    names = [f"{c['name']} (thinking {'on' if c['enable_thinking'] else 'off'})" for c in convs]
    used = sorted({t for p, c in rendered for t in p + c})
    print(f"[canary] {len(rendered)} conversations, {len(used)} distinct tokens", flush=True)

    head = CompactHead(used, REAL_VOCAB_SIZE)
    model = build_model(MODEL_SEED, used).train()
    worst, lost = train(model, head, rendered, MIN_MARGIN, MAX_STEPS, log=lambda m: print(m, flush=True))
    if worst < MIN_MARGIN or lost > -MIN_MARGIN:
        raise RuntimeError(f"training stopped at margin {worst:.3f} (lost state: {lost:.3f}), wanted "
                           f">= {MIN_MARGIN} (<= {-MIN_MARGIN})")
    model.eval()

    examples = list(zip(rendered, names))
    with tempfile.TemporaryDirectory() as tmp:
        bf16_dir, nvfp4_dir = os.path.join(tmp, "canary-bf16"), os.path.join(tmp, "canary-nvfp4")
        export_bf16(model, bf16_dir)
        del model
        check_bf16(bf16_dir, examples)
        from export_nvfp4_modelopt import export_nvfp4_modelopt
        calib = [torch.tensor([p + c[:-1]]) for p, c in rendered]
        export_nvfp4_modelopt(bf16_dir, nvfp4_dir, CALIB_SEED, batches=calib,
                              generation_config=CANARY_GENERATION_CONFIG)
        check_nvfp4(nvfp4_dir, examples)
        # The MTP block (speculative decoding's drafter), trained on the trunk's own answers.
        from add_canary_mtp import add_mtp_to_canary_dirs
        add_mtp_to_canary_dirs(bf16_dir, nvfp4_dir, rendered, log=lambda m: print(m, flush=True))
        for d in (bf16_dir, nvfp4_dir):
            pack(d, os.path.join(args.out, os.path.basename(d) + ".tar.xz"))
    with open(os.path.join(args.out, "tokens.json"), "w") as f:
        json.dump({"about": "prompt and completion token ids of conversations.json, rendered by transformers "
                            "(make_canary_model.py); the tests compare fp4serve's rendering with them",
                   "conversations": [{"name": n, "prompt": p, "completion": c}
                                     for n, (p, c) in zip(names, rendered)]}, f)
        f.write("\n")


if __name__ == "__main__":
    main()
