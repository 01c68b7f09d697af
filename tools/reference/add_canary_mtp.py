#!/usr/bin/env python3
"""Gives the canary model (tests/data/models/canary) an MTP block trained to predict its own next
tokens, so that speculative decoding on it accepts drafts as on a real release.

  /path/to/reference-venv/bin/python tools/reference/add_canary_mtp.py [--canary tests/data/models/canary]

Unpacks canary-{bf16,nvfp4}.tar.xz, trains the block (mtp_training.py's parameters and loss) on the
conversations of tokens.json -- row p of prompt + completion pairs the BF16 trunk's final-norm
hidden state at p with the token at p + 1 and is taught the trunk's argmax at p + 1; the rows that
draft completion tokens count -- until every such row's argmax holds by a margin that survives bf16,
writes it in BF16 with fused experts into both checkpoints (as the releases store mtp.*,
make_tiny_mtp.add_mtp_block) and repacks them (make_canary_model.pack: reproducible archives).
make_canary_model.py calls add_mtp_to_canary_dirs before it packs. Deterministic: seeds, CPU, one thread.
"""
import argparse
import json
import os
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)

import torch  # noqa: E402

MTP_SEED = 3911
MIN_MARGIN = 3.0   # fp32 logits; bf16 weights and activations move them by far less
MAX_STEPS = 600


def completion_rows(prompt, completion):
    """Rows p of prompt + completion whose target is a completion token after the first (the ones
    the drafter proposes: after the first completion token is sampled, p = len(prompt) - 1 ...)."""
    L = len(prompt) + len(completion)
    mask = torch.zeros(L - 1, dtype=torch.bool)
    mask[len(prompt) - 1: L - 2] = True
    return mask


def train_canary_mtp(text_cfg, dense, examples, log=print):
    """examples: [(prompt ids, completion ids)]. Returns ({mtp.* bf16}, greedy agreement of the bf16
    block on the completion rows)."""
    from canary_model import REAL_VOCAB_SIZE, CompactHead
    from goldens import build_causal_lm
    from make_tiny_mtp import random_mtp_state
    from mtp_reference import MtpReference
    from mtp_training import export_mtp_state, mtp_parameters
    used = sorted({t for p, c in examples for t in p + c})
    head = CompactHead(used, REAL_VOCAB_SIZE)
    trunk = build_causal_lm(text_cfg, dense, torch.float32)
    data = []
    with torch.no_grad():
        for p, c in examples:
            ids = torch.tensor([p + c])
            out = trunk(input_ids=ids, output_hidden_states=True)
            target = out.logits[0, 1:].argmax(dim=-1)  # the trunk's token at p + 2, row p
            data.append((ids[0], out.hidden_states[-1][0], target, completion_rows(p, c)))
    del trunk
    init = {k: v.float().numpy() for k, v in random_mtp_state(text_cfg, MTP_SEED).items()}
    ref = MtpReference(text_cfg, dense, init, dtype=torch.float32)
    ref.lm.train()
    opt = torch.optim.Adam(mtp_parameters(ref), lr=3e-3)

    def margins(r):
        out = []
        for ids, hidden, target, mask in data:
            L = ids.shape[0]
            h = r.hidden(ids[1:], hidden[:-1], torch.arange(L - 1))[0]
            lg = head.logits(r.lm.lm_head.weight.to(h.dtype), h)[mask]
            tgt = head.targets(target[mask].tolist())
            top = lg.gather(1, tgt[:, None])[:, 0].float()
            other = lg.scatter(1, tgt[:, None], -1e9).max(dim=1).values.float()
            out.append((lg, tgt, top - other))
        return out

    for step in range(MAX_STEPS):
        opt.zero_grad()
        loss = 0.0
        for lg, tgt, margin in margins(ref):
            loss = loss + torch.nn.functional.cross_entropy(lg, tgt) + torch.relu(MIN_MARGIN + 1.0 - margin).mean()
        loss.backward()
        opt.step()
        if step % 20 == 0:
            with torch.no_grad():
                worst = min(float(m.min()) for _, _, m in margins(ref))
            log(f"[canary-mtp] step {step}: loss {float(loss):.4f}, smallest margin {worst:.3f}")
            if worst >= MIN_MARGIN:
                break
    mtp = export_mtp_state(ref)
    bf16 = MtpReference(text_cfg, dense, {k: v.float().numpy() for k, v in mtp.items()}, dtype=torch.bfloat16)
    with torch.no_grad():
        agree = [m > 0 for _, _, m in margins(bf16)]
    rate = float(torch.cat(agree).float().mean())
    log(f"[canary-mtp] bf16 MTP agrees with the trunk on {rate:.3f} of the completion rows")
    return mtp, rate


def add_mtp_to_canary_dirs(bf16_dir, nvfp4_dir, examples, log=print):
    from dequant import load_dense_text_state, read_json
    from make_tiny_mtp import add_mtp_block
    cfg = read_json(os.path.join(bf16_dir, "config.json"))["text_config"]
    mtp, rate = train_canary_mtp(cfg, load_dense_text_state(bf16_dir), examples, log=log)
    if rate < 1.0:
        raise RuntimeError(f"the canary's bf16 MTP misses {1 - rate:.3f} of the completion rows")
    for d in (bf16_dir, nvfp4_dir):
        add_mtp_block(d, mtp)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--canary", default=os.path.join(ROOT, "tests", "data", "models", "canary"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    from make_canary_model import pack
    with open(os.path.join(args.canary, "tokens.json")) as f:
        convs = json.load(f)["conversations"]
    # The text conversations only, as make_canary_model.py trains it (no pixels here for the image ones).
    from canary_model import CANARY_SPECIAL_IDS
    examples = [(c["prompt"], c["completion"]) for c in convs
                if CANARY_SPECIAL_IDS["image_token_id"] not in c["prompt"]]
    with tempfile.TemporaryDirectory() as tmp:
        dirs = []
        for name in ("canary-bf16", "canary-nvfp4"):
            d = os.path.join(tmp, name)
            with tarfile.open(os.path.join(args.canary, name + ".tar.xz")) as tar:
                tar.extractall(d, filter="data")
            dirs.append(d)
        add_mtp_to_canary_dirs(dirs[0], dirs[1], examples, log=lambda m: print(m, flush=True))
        for d in dirs:
            pack(d, os.path.join(args.canary, os.path.basename(d) + ".tar.xz"))


if __name__ == "__main__":
    main()
