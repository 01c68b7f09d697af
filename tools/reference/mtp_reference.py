"""The MTP (multi-token prediction) forward of Qwen3.5/3.6 in PyTorch, following vLLM's
vllm/model_executor/models/qwen3_5_mtp.py (Qwen3_5MultiTokenPredictor.forward + Qwen3_5MTP
compute_logits): transformers loads no mtp.* tensors, so this is the reference for ours
(src/model/mtp_forward.cpp, docs/model-arch.md §2.5).

For the row at position p (vLLM's EagleProposer feeds the target's positions):
  e  = pre_fc_norm_embedding(embed_tokens(token at p + 1))
  h  = pre_fc_norm_hidden(hidden at p)        # the target's output after its final norm
  x  = fc(concat([e, h]))                      # embedding half first
  x  = decoder layer (full attention + sparse MoE), its own KV cache, the target's RoPE
  h' = norm(x);  logits = lm_head(h')          # embed_tokens and lm_head are the target's
h' is what a chained draft feeds back as its hidden state.

The decoder layer, norm and lm_head are a one-layer Qwen3_5MoeForCausalLM of transformers run on
inputs_embeds = x: the same classes (and numerics: eager attention, eager experts) as the goldens
of the trunk (goldens.py).
"""
import numpy as np
import torch

MTP_PREFIX = "mtp."


def mtp_layer_model(text_cfg_dict, dense_state, mtp_state, dtype):
    """The decoder layer + norm + lm_head as a one-layer Qwen3_5MoeForCausalLM. dense_state: the
    trunk's (model.embed_tokens.weight, lm_head.weight); mtp_state: {name: f32 array} of mtp.*."""
    from goldens import build_causal_lm
    cfg = dict(text_cfg_dict)
    cfg.update(num_hidden_layers=1, layer_types=["full_attention"], mtp_num_hidden_layers=0)
    state = {"model.embed_tokens.weight": dense_state["model.embed_tokens.weight"],
             "lm_head.weight": dense_state["lm_head.weight"],
             "model.norm.weight": mtp_state["mtp.norm.weight"]}
    for k, v in mtp_state.items():
        if k.startswith("mtp.layers.0."):
            state["model.layers.0." + k[len("mtp.layers.0."):]] = v
    return build_causal_lm(cfg, state, dtype)


class MtpReference:
    def __init__(self, text_cfg_dict, dense_state, mtp_state, dtype=torch.bfloat16):
        from transformers.models.qwen3_5_moe.modeling_qwen3_5_moe import Qwen3_5MoeRMSNorm
        self.dtype = dtype
        self.lm = mtp_layer_model(text_cfg_dict, dense_state, mtp_state, dtype)
        H = text_cfg_dict["hidden_size"]
        eps = text_cfg_dict["rms_norm_eps"]

        def tensor(name):
            return torch.from_numpy(np.ascontiguousarray(mtp_state[name])).to(dtype)

        self.norm_e = Qwen3_5MoeRMSNorm(H, eps=eps).to(dtype)
        self.norm_e.weight.data.copy_(tensor("mtp.pre_fc_norm_embedding.weight"))
        self.norm_h = Qwen3_5MoeRMSNorm(H, eps=eps).to(dtype)
        self.norm_h.weight.data.copy_(tensor("mtp.pre_fc_norm_hidden.weight"))
        self.fc = torch.nn.Linear(2 * H, H, bias=False).to(dtype)
        self.fc.weight.data.copy_(tensor("mtp.fc.weight"))

    def hidden(self, next_tokens, hidden, positions):
        """h' [B, T, H] for next_tokens [B, T] (token at p + 1 for each row), hidden [B, T, H] (the
        target's final-norm output at p) and positions [T] (p; one sequence per batch row)."""
        ids = torch.as_tensor(next_tokens)
        ids = ids.reshape(1, -1) if ids.dim() == 1 else ids
        B, T = ids.shape
        e = self.norm_e(self.lm.model.embed_tokens(ids))
        h = self.norm_h(hidden.to(self.dtype).reshape(B, T, -1))
        x = self.fc(torch.cat([e, h], dim=-1))
        pos = torch.as_tensor(positions).reshape(1, -1).expand(B, -1)
        return self.lm.model(inputs_embeds=x, position_ids=pos, use_cache=False).last_hidden_state

    def forward(self, next_tokens, hidden, positions):
        """(logits, h'): [T, V] and [T, H] for one sequence (1-D next_tokens), else [B, T, ...]."""
        h = self.hidden(next_tokens, hidden, positions)
        logits = self.lm.lm_head(h)
        if torch.as_tensor(next_tokens).dim() == 1:
            return logits[0], h[0]
        return logits, h
