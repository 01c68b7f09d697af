#!/usr/bin/env python3
"""Gives tiny models an MTP block (mtp.*) and writes its goldens (mtp_goldens.json / .bin).

  .venv-reference/bin/python tools/reference/make_tiny_mtp.py [--models tests/data/models] [--only bf16]

The block starts random and is trained on the BF16 trunk's own samples to predict its next tokens
(mtp_training.py). Every release stores mtp.* in BF16 with fused experts, the NVFP4 one included (19 tensors,
docs/quant-formats.md), so each tiny model gets the same BF16 block in its own file, mtp.safetensors,
registered in the index (created for a single-file model), and config.json says
mtp_num_hidden_layers 1. The trunk's tensors and goldens are untouched (transformers ignores mtp.*).
make_tiny_models.py calls this after exporting the formats.

Goldens: for prompts 1 and 2 of goldens.json (7 and 33 tokens), the trunk's bf16 final-norm hidden
states by transformers, then mtp_reference.py (vLLM's MTP forward) over rows p = 0 .. T-2 with the
token at p + 1: prompt<i>/bf16/mtp_logits [T-1, V] and prompt<i>/bf16/mtp_hidden [T-1, H]; and one
chained draft row from the last row's h' and its argmax, at position T-1 (vLLM's second draft step):
prompt<i>/bf16/mtp_chain_logits [1, V].
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402

MTP_SEED = 20261202
TRAIN_SEQS, PROMPT_LEN, GEN_LEN, TRAIN_STEPS = 64, 8, 40, 300
MTP_FORMATS = ("bf16",)  # indexed already; a single-file model would need renaming (its model.safetensors wins)
GOLDEN_PROMPTS = (1, 2)


def random_mtp_state(text_cfg, seed):
    """{name: torch bf16 tensor}: the 19 tensors of the release's MTP block, random (std 0.02 as the
    trunk's initializer; norms 1 + w with w ~ N(0, 0.1) so they are not the identity)."""
    g = torch.Generator().manual_seed(seed)
    H, E = text_cfg["hidden_size"], text_cfg["num_experts"]
    I, Is = text_cfg["moe_intermediate_size"], text_cfg["shared_expert_intermediate_size"]
    D, Hq, Hkv = text_cfg["head_dim"], text_cfg["num_attention_heads"], text_cfg["num_key_value_heads"]
    shapes = {
        "mtp.fc.weight": [H, 2 * H],
        "mtp.layers.0.self_attn.q_proj.weight": [Hq * D * 2, H],
        "mtp.layers.0.self_attn.k_proj.weight": [Hkv * D, H],
        "mtp.layers.0.self_attn.v_proj.weight": [Hkv * D, H],
        "mtp.layers.0.self_attn.o_proj.weight": [H, Hq * D],
        "mtp.layers.0.mlp.gate.weight": [E, H],
        "mtp.layers.0.mlp.experts.gate_up_proj": [E, 2 * I, H],
        "mtp.layers.0.mlp.experts.down_proj": [E, H, I],
        "mtp.layers.0.mlp.shared_expert.gate_proj.weight": [Is, H],
        "mtp.layers.0.mlp.shared_expert.up_proj.weight": [Is, H],
        "mtp.layers.0.mlp.shared_expert.down_proj.weight": [H, Is],
        "mtp.layers.0.mlp.shared_expert_gate.weight": [1, H],
    }
    norms = {
        "mtp.pre_fc_norm_embedding.weight": [H], "mtp.pre_fc_norm_hidden.weight": [H], "mtp.norm.weight": [H],
        "mtp.layers.0.input_layernorm.weight": [H], "mtp.layers.0.post_attention_layernorm.weight": [H],
        "mtp.layers.0.self_attn.q_norm.weight": [D], "mtp.layers.0.self_attn.k_norm.weight": [D],
    }
    out = {}
    for name in sorted(shapes):
        out[name] = (torch.randn(shapes[name], generator=g) * 0.02).to(torch.bfloat16)
    for name in sorted(norms):
        out[name] = (torch.randn(norms[name], generator=g) * 0.1).to(torch.bfloat16)
    return out


def add_mtp_block(model_dir, mtp):
    """Writes mtp.safetensors, registers it in the index and sets mtp_num_hidden_layers 1. A
    single-file model's model.safetensors becomes model-00001-of-00001.safetensors: loaders (ours,
    transformers) read model.safetensors alone when it exists, index or not."""
    from safetensors.torch import save_file
    from checkpoint_writer import write_json
    from safetensors_np import checkpoint_files, read_header
    single = os.path.join(model_dir, "model.safetensors")
    if os.path.exists(single):
        os.replace(single, os.path.join(model_dir, "model-00001-of-00001.safetensors"))
        write_json(os.path.join(model_dir, "model.safetensors.index.json"),
                   {"metadata": {}, "weight_map": {k: "model-00001-of-00001.safetensors"
                                                   for k in read_header(os.path.join(
                                                       model_dir, "model-00001-of-00001.safetensors"))[0]
                                                   if k != "__metadata__"}})
    old_files = [f for f in checkpoint_files(model_dir) if os.path.basename(f) != "mtp.safetensors"]
    save_file({k: v.contiguous() for k, v in mtp.items()}, os.path.join(model_dir, "mtp.safetensors"),
              metadata={"format": "pt"})
    weight_map, total = {}, 0
    for f in old_files + [os.path.join(model_dir, "mtp.safetensors")]:
        header, _ = read_header(f)
        for k, v in header.items():
            if k == "__metadata__":
                continue
            weight_map[k] = os.path.basename(f)
            total += v["data_offsets"][1] - v["data_offsets"][0]
    write_json(os.path.join(model_dir, "model.safetensors.index.json"),
               {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))})
    cfg_path = os.path.join(model_dir, "config.json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    cfg["text_config"]["mtp_num_hidden_layers"] = 1
    write_json(cfg_path, cfg)


def write_mtp_goldens(model_dir, mtp, seed):
    from dequant import load_dense_text_state, read_json
    from goldens import BinWriter, build_causal_lm
    from mtp_reference import MtpReference
    text_cfg = read_json(os.path.join(model_dir, "config.json"))["text_config"]
    dense = load_dense_text_state(model_dir)
    prompts = read_json(os.path.join(model_dir, "goldens.json"))["prompts"]
    trunk = build_causal_lm(text_cfg, dense, torch.bfloat16)
    ref = MtpReference(text_cfg, dense, {k: v.float().numpy() for k, v in mtp.items()})
    w = BinWriter()
    used = {}
    for i in GOLDEN_PROMPTS:
        prompt = prompts[i]
        with torch.no_grad():
            hidden = trunk(input_ids=torch.tensor([prompt]), output_hidden_states=True).hidden_states[-1][0]
            T = len(prompt)
            logits, h_out = ref.forward(prompt[1:], hidden[: T - 1], list(range(T - 1)))
        w.add(f"prompt{i}/bf16/mtp_logits", logits)
        w.add(f"prompt{i}/bf16/mtp_hidden", h_out)
        # vLLM's next draft step: the last row's h' and its argmax, one position on. The KV of the
        # T-1 rows above is the cache this row attends to, so run all rows again with it appended.
        draft = int(torch.argmax(logits[-1]))
        chain_hidden = torch.cat([hidden[: T - 1].to(h_out.dtype), h_out[-1:]], dim=0)
        # Rows 0..T-2 keep the target's hidden; row T-1 feeds h' (a causal model: earlier rows are
        # unchanged by the appended one, so its logits are the chained step's).
        with torch.no_grad():
            chain_logits, _ = ref.forward(prompt[1:] + [draft], chain_hidden, list(range(T)))
        w.add(f"prompt{i}/bf16/mtp_chain_logits", chain_logits[-1:])
        used[str(i)] = {"prompt": prompt, "chain_token": draft}
    doc = {
        "producer": "tools/reference/make_tiny_mtp.py (mtp_reference.py: vLLM qwen3_5_mtp.py's forward on "
                    "transformers' Qwen3_5MoeForCausalLM classes, eager attention and experts, bf16, CPU)",
        "seed": seed,
        "prompts": used,
        "rows": "row j: position j, token prompt[j + 1], the trunk's bf16 final-norm hidden state at j",
        "tensors": w.index,
    }
    with open(os.path.join(model_dir, "mtp_goldens.bin"), "wb") as f:
        for c in w.chunks:
            f.write(c)
    with open(os.path.join(model_dir, "mtp_goldens.json"), "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")


def trained_mtp_state(models_dir, seed, log=print):
    """The random block trained on the BF16 trunk's own samples (mtp_training.py): drafts then agree
    with the trunk often enough that speculative decoding's accept path is exercised by the tests."""
    from dequant import load_dense_text_state, read_json
    from mtp_reference import MtpReference
    from mtp_training import export_mtp_state, greedy_acceptance, self_generated, train_mtp
    bf16_dir = os.path.join(models_dir, "tiny-bf16")
    cfg = read_json(os.path.join(bf16_dir, "config.json"))["text_config"]
    dense = load_dense_text_state(bf16_dir)
    init = {k: v.float().numpy() for k, v in random_mtp_state(cfg, seed).items()}
    seqs = self_generated(cfg, dense, n=TRAIN_SEQS + 16, prompt_len=PROMPT_LEN, gen_len=GEN_LEN, vocab=500, seed=seed)
    mask = torch.zeros(seqs.shape[0], seqs.shape[1] - 1, dtype=torch.bool)
    mask[:, PROMPT_LEN - 1:] = True  # rows that predict generated tokens: where drafting happens
    ref = train_mtp(cfg, dense, init, seqs[:TRAIN_SEQS], mask[:TRAIN_SEQS], TRAIN_STEPS, seed=seed, log=log)
    mtp = export_mtp_state(ref)
    bf16_ref = MtpReference(cfg, dense, {k: v.float().numpy() for k, v in mtp.items()})
    acc = greedy_acceptance(bf16_ref, cfg, dense, seqs[TRAIN_SEQS:], mask[TRAIN_SEQS:])
    log(f"[make_tiny_mtp] held-out greedy agreement of the bf16 MTP with the trunk: {acc:.3f}")
    return mtp, acc


def add_mtp_to_tiny_models(models_dir, formats=MTP_FORMATS, seed=MTP_SEED):
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    mtp, _ = trained_mtp_state(models_dir, seed, log=lambda m: print(m, flush=True))
    for fmt in formats:
        d = os.path.join(models_dir, f"tiny-{fmt}")
        add_mtp_block(d, mtp)
        write_mtp_goldens(d, mtp, seed)
        print(f"[make_tiny_mtp] {fmt}: {d}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=os.path.join(HERE, "..", "..", "tests", "data", "models"))
    ap.add_argument("--only", default=",".join(MTP_FORMATS))
    args = ap.parse_args()
    add_mtp_to_tiny_models(os.path.abspath(args.models), [f for f in args.only.split(",") if f])


if __name__ == "__main__":
    main()
