"""Golden outputs computed by transformers' Qwen3_5MoeForCausalLM on a checkpoint's (dequantized) weights.

Two runs per checkpoint:
  bf16 - weights rounded to bfloat16 (what from_pretrained(dtype=bfloat16) does; A_log and
         linear_attn.norm included), activations bf16: the reference users run.
  f32  - the same weights in float32 (A_log/norm at full F32 precision when stored so), activations f32.
Both use attn_implementation="eager" and experts_implementation="eager" (the code docs/model-arch.md
§6 follows: fp32 softmax, per-expert loop with a bf16 index_add_), on CPU.

File layout (readable without numpy): goldens.json (index + metadata + token lists) and goldens.bin
(little-endian raw arrays; "bf16" entries are raw bfloat16 bit patterns, "f32" IEEE float32, "i32").
"""
import json
import os

import numpy as np
import torch

N_NEW_TOKENS = 64
N_STEP_LOGITS = 16  # decode-step logits are stored for the first 16 greedy steps only (size)


def make_prompts(seed, lengths=(1, 7, 33, 100), vocab=500):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab, (n,), generator=g).tolist() for n in lengths]


def build_causal_lm(text_cfg_dict, dense_state, dtype):
    from transformers import Qwen3_5MoeForCausalLM, Qwen3_5MoeTextConfig
    cfg = Qwen3_5MoeTextConfig(**{k: v for k, v in text_cfg_dict.items() if k not in ("model_type", "dtype")})
    cfg._attn_implementation = "eager"
    cfg._experts_implementation = "eager"
    # _from_config builds the modules directly in `dtype` like from_pretrained does; a later
    # model.to(bfloat16) would also round the fp32 RoPE inv_freq buffer and change the logits.
    model = Qwen3_5MoeForCausalLM._from_config(cfg, dtype=dtype)
    state = {k: torch.from_numpy(np.ascontiguousarray(v)).to(dtype) for k, v in dense_state.items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise RuntimeError(f"state dict mismatch: missing={missing} unexpected={unexpected}")
    model = model.eval()
    inv_freq = model.model.rotary_emb.inv_freq
    assert inv_freq.dtype == torch.float32, inv_freq.dtype
    assert model.config._attn_implementation == "eager", model.config._attn_implementation
    return model


@torch.no_grad()
def greedy(model, prompt, n_new):
    """Prefill the prompt, then decode one token at a time with the cache (HF's recurrent GDN path)."""
    ids = torch.tensor([prompt])
    out = model(input_ids=ids, use_cache=True)
    past = out.past_key_values
    logits = out.logits[0, -1]
    tokens, margins, step_logits = [], [], []
    for _ in range(n_new):
        step_logits.append(logits.clone())
        # torch.argmax = the first index among equal maxima, like HF's greedy search; bf16 logits tie
        # often, so the margin (top1 - top2, 0 for a tie) is recorded for tolerant comparisons.
        tok = int(torch.argmax(logits))
        top2 = torch.topk(logits.float(), 2).values
        tokens.append(tok)
        margins.append(float(top2[0] - top2[1]))
        out = model(input_ids=torch.tensor([[tok]]), past_key_values=past, use_cache=True)
        past = out.past_key_values
        logits = out.logits[0, -1]
    return tokens, margins, torch.stack(step_logits)


class BinWriter:
    def __init__(self):
        self.chunks, self.index, self.offset = [], {}, 0

    def add(self, name, t):
        t = t.detach().cpu().contiguous()
        if t.dtype == torch.bfloat16:
            raw, dt = t.view(torch.int16).numpy().astype("<i2").tobytes(), "bf16"
        elif not t.dtype.is_floating_point:
            raw, dt = t.to(torch.int32).numpy().astype("<i4").tobytes(), "i32"
        else:
            raw, dt = t.to(torch.float32).numpy().astype("<f4").tobytes(), "f32"
        self.index[name] = {"dtype": dt, "shape": list(t.shape), "offset": self.offset, "nbytes": len(raw)}
        self.chunks.append(raw)
        self.offset += len(raw)


class RouterRecorder:
    """Records, per MoE layer, the experts the router picked and how decisive the pick was.

    A routed MoE is discontinuous: when the k-th and (k+1)-th router probabilities nearly tie, any
    rounding difference swaps an expert and moves that token's logits by O(1) (seen between the
    bf16 and f32 runs of these very goldens). Tests use the margin to tell such positions apart."""

    def __init__(self, model):
        self.calls = []
        self.k = model.config.num_experts_per_tok
        for layer in model.model.layers:
            layer.mlp.gate.register_forward_hook(self._hook)

    def _hook(self, module, args, out):
        router_logits, _, indices = out
        probs = torch.softmax(router_logits.float(), dim=-1).sort(dim=-1, descending=True).values
        self.calls.append((indices.clone(), (probs[:, self.k - 1] - probs[:, self.k]).clone()))

    def take(self):
        idx = torch.stack([c[0] for c in self.calls])      # [layers, T, k]
        margin = torch.stack([c[1] for c in self.calls])   # [layers, T]
        self.calls = []
        return idx, margin


def compute_goldens(text_cfg_dict, dense_state, prompts, hidden_prompt_index, out_dir, metadata):
    w = BinWriter()
    runs = {}
    for run, dtype in (("bf16", torch.bfloat16), ("f32", torch.float32)):
        model = build_causal_lm(text_cfg_dict, dense_state, dtype)
        router = RouterRecorder(model)
        per_prompt = []
        for p_i, prompt in enumerate(prompts):
            with torch.no_grad():
                out = model(input_ids=torch.tensor([prompt]), output_hidden_states=(p_i == hidden_prompt_index))
            w.add(f"prompt{p_i}/{run}/logits", out.logits[0])
            experts, margin = router.take()
            w.add(f"prompt{p_i}/{run}/router_topk", experts)
            w.add(f"prompt{p_i}/{run}/router_margin", margin)
            if p_i == hidden_prompt_index:
                w.add(f"prompt{p_i}/{run}/hidden_states", torch.stack([h[0] for h in out.hidden_states]))
            tokens, margins, step_logits = greedy(model, prompt, N_NEW_TOKENS)
            router.calls = []  # the decode steps' routing is not stored
            if run == "bf16":
                w.add(f"prompt{p_i}/{run}/step_logits", step_logits[:N_STEP_LOGITS])
            per_prompt.append({"greedy_tokens": tokens, "greedy_top2_margins": [round(m, 6) for m in margins]})
        runs[run] = per_prompt
    doc = dict(metadata)
    doc["prompts"] = prompts
    doc["runs"] = runs
    doc["tensors"] = w.index
    with open(os.path.join(out_dir, "goldens.bin"), "wb") as f:
        for c in w.chunks:
            f.write(c)
    with open(os.path.join(out_dir, "goldens.json"), "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    return doc
