#!/usr/bin/env python3
"""Trains the canary model and writes it as BF16 and NVFP4 (ModelOpt) checkpoints, packed as
tests/data/models/canary/canary-{bf16,nvfp4}.tar.xz.

  /path/to/reference-venv/bin/python tools/reference/make_canary_model.py [--out tests/data/models/canary]

The model (canary_model.py) answers the conversations of tests/data/models/canary/conversations.json
(fp4serve canary's questions, thinking off and on, one tool call, and the colour of solid-colour
images) through the real Qwen3.6 chat template and the real tokenizer (.cache/tokenizers/qwen3.5, installed by scripts/setup.sh). Both
checkpoints are checked here with transformers before they are packed: greedy decoding of every
conversation gives exactly its completion (BF16: from_pretrained in bf16; NVFP4: ModelOpt's weights
dequantized, bf16 activations). The archives hold no tokenizer: the tests add tokenizer.json,
tokenizer_config.json and chat_template.jinja from the same sources, as a downloaded model has them.
Images go through transformers' own image processor, configured by the preprocessor_config.json the
checkpoints carry, and the checkpoint's vision tower, which keeps its random initial weights.
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
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)

import torch  # noqa: E402

from canary_model import (CANARY_GENERATION_CONFIG, CANARY_PREPROCESSOR_CONFIG, CompactHead, IM_END_ID, REAL_VOCAB_SIZE,  # noqa: E402
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
    write_json(os.path.join(out_dir, "preprocessor_config.json"), CANARY_PREPROCESSOR_CONFIG)


def image_processor():
    """transformers' image processor for the canary, built from the preprocessor_config.json the
    checkpoints carry (AutoImageProcessor reads it as from a downloaded model)."""
    from transformers import AutoImageProcessor
    with tempfile.TemporaryDirectory() as tmp:
        write_json(os.path.join(tmp, "preprocessor_config.json"), CANARY_PREPROCESSOR_CONFIG)
        return AutoImageProcessor.from_pretrained(tmp)


@torch.no_grad()
def greedy_completion(model, prompt, n_max, mm=None):
    ids = torch.tensor([prompt])
    model.model.rope_deltas = None  # decode steps continue from this prompt's M-RoPE positions
    out = model(input_ids=ids, use_cache=True, **(mm or {}))
    tokens = []
    for _ in range(n_max):
        tok = int(torch.argmax(out.logits[0, -1]))
        tokens.append(tok)
        if tok == IM_END_ID:
            break
        out = model(input_ids=torch.tensor([[tok]]), past_key_values=out.past_key_values, use_cache=True)
    return tokens


def check_answers(model, examples, what):
    for (prompt, completion, mm), name in examples:
        got = greedy_completion(model, prompt, len(completion) + 4, mm)
        if got != completion:
            raise RuntimeError(f"{what}: {name}: greedy gives {got}, expected {completion}")
    print(f"[canary] {what}: all {len(examples)} conversations answered exactly", flush=True)


def check_bf16(model_dir, examples):
    from transformers import Qwen3_5MoeForConditionalGeneration
    model = Qwen3_5MoeForConditionalGeneration.from_pretrained(
        model_dir, dtype=torch.bfloat16, attn_implementation="eager", experts_implementation="eager").eval()
    check_answers(model, examples, "BF16 checkpoint (transformers, bf16)")


def check_nvfp4(model_dir, bf16_dir, examples):
    """The NVFP4 language model (ModelOpt's weights dequantized) in transformers' multimodal model, whose
    vision tower (not quantized: the recipe leaves model.visual in BF16) comes from the BF16 checkpoint."""
    import numpy as np
    from dequant import load_dense_text_state
    from transformers import Qwen3_5MoeForConditionalGeneration
    model = Qwen3_5MoeForConditionalGeneration.from_pretrained(
        bf16_dir, dtype=torch.bfloat16, attn_implementation="eager", experts_implementation="eager").eval()
    state = {("model.language_model." + k[len("model."):] if k.startswith("model.") else k):
             torch.from_numpy(np.ascontiguousarray(v)).to(torch.bfloat16)
             for k, v in load_dense_text_state(model_dir).items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.startswith("model.visual.")]
    if missing or unexpected:
        raise RuntimeError(f"NVFP4 state dict mismatch: missing={missing} unexpected={unexpected}")
    check_answers(model, examples, "NVFP4 checkpoint (ModelOpt weights dequantized, bf16)")


@torch.no_grad()
def init_from_archive(model, archive):
    """Loads a canary-bf16 archive's weights (fp32 from its bf16) into the freshly built model. Rows of
    embed_tokens / lm_head that are zero there (tokens that archive never used) keep their fresh random
    values, so the new conversations' tokens start like a from-scratch run."""
    from transformers import Qwen3_5MoeForConditionalGeneration
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")
        old = Qwen3_5MoeForConditionalGeneration.from_pretrained(
            tmp, dtype=torch.float32, attn_implementation="eager", experts_implementation="eager")
    state = old.state_dict()
    for name, p in model.named_parameters():
        if name.endswith("embed_tokens.weight") or name == "lm_head.weight":
            kept = state[name].abs().sum(dim=1) != 0
            p[kept] = state[name][kept]
        else:
            p.copy_(state[name])
    print(f"[canary] initialised from {archive}", flush=True)


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
    ap.add_argument("--init-from", metavar="ARCHIVE",
                    help="start training from this canary-bf16.tar.xz (e.g. the committed one) instead of "
                         "random weights: what it already answers needs no relearning, so adding "
                         "conversations trains in minutes instead of hours on a busy core")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    with open(TEMPLATE) as f:
        template = f.read()
    convs = load_conversations(os.path.join(args.out, "conversations.json"))
    processor = image_processor()
    examples3 = [render(tokenizer, template, c, processor) for c in convs]
    rendered = [(p, c) for p, c, _ in examples3]
    text_only = [(p, c) for p, c, mm in examples3 if mm is None]
    names = [f"{c['name']} (thinking {'on' if c['enable_thinking'] else 'off'})" for c in convs]
    used = sorted({t for p, c in rendered for t in p + c})
    print(f"[canary] {len(rendered)} conversations, {len(used)} distinct tokens", flush=True)

    head = CompactHead(used, REAL_VOCAB_SIZE)
    model = build_model(MODEL_SEED, used)
    if args.init_from:
        init_from_archive(model, args.init_from)
    model = model.train()
    started = time.time()
    worst, lost = train(model, head, examples3, MIN_MARGIN, MAX_STEPS, log=lambda m: print(m, flush=True))
    print(f"[canary] trained in {time.time() - started:.0f} s", flush=True)
    if worst < MIN_MARGIN or lost > -MIN_MARGIN:
        raise RuntimeError(f"training stopped at margin {worst:.3f} (lost state: {lost:.3f}), wanted "
                           f">= {MIN_MARGIN} (<= {-MIN_MARGIN})")
    model.eval()

    examples = list(zip(examples3, names))
    with tempfile.TemporaryDirectory() as tmp:
        bf16_dir, nvfp4_dir = os.path.join(tmp, "canary-bf16"), os.path.join(tmp, "canary-nvfp4")
        export_bf16(model, bf16_dir)
        del model
        check_bf16(bf16_dir, examples)
        from export_nvfp4_modelopt import export_nvfp4_modelopt
        calib = [torch.tensor([p + c[:-1]]) for p, c in text_only]
        export_nvfp4_modelopt(bf16_dir, nvfp4_dir, CALIB_SEED, batches=calib,
                              generation_config=CANARY_GENERATION_CONFIG)
        write_json(os.path.join(nvfp4_dir, "preprocessor_config.json"), CANARY_PREPROCESSOR_CONFIG)
        check_nvfp4(nvfp4_dir, bf16_dir, examples)
        # The MTP block (speculative decoding's drafter), trained on the trunk's own answers.
        from add_canary_mtp import add_mtp_to_canary_dirs
        add_mtp_to_canary_dirs(bf16_dir, nvfp4_dir, text_only, log=lambda m: print(m, flush=True))
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
