"""Training an MTP block (mtp_reference.py) to predict its trunk's own next tokens, so that
speculative decoding on the tiny and canary models accepts drafts as a real release's MTP layer does.

Row p of a sequence pairs the trunk's final-norm hidden state at p with the token at p + 1; its
target is the trunk's own prediction at p + 1 (the token the target model would emit at p + 2).
Only the MTP's parameters move: embed_tokens and lm_head are the trunk's (shared, as in every
release). Float32, CPU, one thread, fixed seeds: deterministic.
"""
import torch

from goldens import build_causal_lm
from mtp_reference import MtpReference


def mtp_parameters(ref):
    """The trainable modules of an MtpReference: norms, fc, the decoder layer and the final norm."""
    params = list(ref.norm_e.parameters()) + list(ref.norm_h.parameters()) + list(ref.fc.parameters())
    params += list(ref.lm.model.layers.parameters()) + list(ref.lm.model.norm.parameters())
    for p in ref.lm.model.embed_tokens.parameters():
        p.requires_grad_(False)
    for p in ref.lm.lm_head.parameters():
        p.requires_grad_(False)
    return params


def export_mtp_state(ref):
    """{mtp.* name: bf16 tensor}, experts fused, as the releases store the block."""
    out = {"mtp.fc.weight": ref.fc.weight, "mtp.pre_fc_norm_embedding.weight": ref.norm_e.weight,
           "mtp.pre_fc_norm_hidden.weight": ref.norm_h.weight, "mtp.norm.weight": ref.lm.model.norm.weight}
    for k, v in ref.lm.model.layers[0].state_dict().items():
        out["mtp.layers.0." + k] = v
    return {k: v.detach().to(torch.bfloat16).contiguous() for k, v in sorted(out.items())}


def trunk_targets(trunk, seqs):
    """(final-norm hidden [B, L, H], logits [B, L, V]) of the trunk on seqs, no gradients."""
    with torch.no_grad():
        out = trunk(input_ids=seqs, output_hidden_states=True)
    return out.hidden_states[-1], out.logits


def train_mtp(text_cfg, dense_state, mtp_state, seqs, row_mask, steps, lr=2e-3, batch=16, seed=0,
              head=None, log=print):
    """Trains the MTP block on seqs [N, L] (int64): the MTP row p of a sequence gets (token p + 1,
    trunk hidden p) and is taught the trunk's argmax at p + 1 (cross-entropy plus a margin hinge, so
    the bf16 export keeps the argmax). row_mask [N, L - 1] bool selects the rows that count.
    head: a canary_model.CompactHead for a model whose unused lm_head rows are zero (exact softmax
    without the full vocabulary), else the full lm_head. Returns the trained MtpReference (float32)."""
    trunk = build_causal_lm(text_cfg, dense_state, torch.float32)
    hidden, logits = trunk_targets(trunk, seqs)
    del trunk
    target = logits[:, 1:].argmax(dim=-1)              # [N, L - 1]: the trunk's token at p + 2
    ref = MtpReference(text_cfg, dense_state, mtp_state, dtype=torch.float32)
    ref.lm.train()
    opt = torch.optim.Adam(mtp_parameters(ref), lr=lr)
    g = torch.Generator().manual_seed(seed)
    N, L = seqs.shape
    positions = torch.arange(L - 1)
    for step in range(steps):
        idx = torch.randperm(N, generator=g)[:batch]
        h_out = ref.hidden(seqs[idx, 1:], hidden[idx, :-1], positions)
        if head is not None:
            lg = head.logits(ref.lm.lm_head.weight, h_out)
            tgt = head.targets(target[idx].reshape(-1).tolist()).reshape(target[idx].shape)
        else:
            lg = ref.lm.lm_head(h_out)
            tgt = target[idx]
        mask = row_mask[idx]
        lg, tgt = lg[mask], tgt[mask]
        top = lg.gather(1, tgt[:, None])[:, 0]
        other = lg.scatter(1, tgt[:, None], -1e9).max(dim=1).values
        loss = torch.nn.functional.cross_entropy(lg, tgt) + torch.relu(2.0 - (top - other)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0 or step == steps - 1:
            acc = float((lg.argmax(dim=-1) == tgt).float().mean())
            log(f"[mtp] step {step}: loss {float(loss):.4f}, argmax agreement {acc:.3f}")
    ref.lm.eval()
    return ref


def self_generated(trunk_cfg, dense_state, n, prompt_len, gen_len, vocab, seed, temperature=1.0):
    """n sequences: random prompts continued by the trunk's own samples (what a drafter sees)."""
    trunk = build_causal_lm(trunk_cfg, dense_state, torch.float32)
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (n, prompt_len), generator=g)
    with torch.no_grad():
        for _ in range(gen_len):
            logits = trunk(input_ids=ids).logits[:, -1].float() / temperature
            nxt = torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=g)
            ids = torch.cat([ids, nxt], dim=1)
    return ids


def greedy_acceptance(ref, trunk_cfg, dense_state, seqs, row_mask):
    """Fraction of masked rows whose MTP argmax is the trunk's argmax at p + 1 (bf16 reference)."""
    hidden, logits = trunk_targets(build_causal_lm(trunk_cfg, dense_state, torch.bfloat16), seqs)
    with torch.no_grad():
        lg, _ = ref.forward(seqs[:, 1:], hidden[:, :-1], torch.arange(seqs.shape[1] - 1))
    agree = lg.argmax(dim=-1) == logits[:, 1:].argmax(dim=-1)
    return float(agree[row_mask].float().mean())

