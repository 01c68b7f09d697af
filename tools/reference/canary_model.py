"""The canary model: a tiny Qwen3.5-MoE (transformers' own classes) with the real 248,320-entry vocabulary,
trained to answer the canary questions through the real chat template and tokenizer.

Only the rows of embed_tokens and lm_head for tokens that occur in the training conversations are
trained; every other row is exactly zero, so those tokens get logit 0 and the checkpoint compresses to
a few hundred kB (the archive committed under tests/data/models/canary/). Training uses a compact
softmax that is exact for this layout: logits of the n used tokens plus one column holding
log(V - n), the log of the sum of exp(0) over the V - n unused tokens.
"""
import copy
import json
import math

import torch

from tiny_model import TINY_TEXT_CONFIG, TINY_VISION_CONFIG

REAL_VOCAB_SIZE = 248320          # the release's embedding rows (tokenizer: 248,077 ids)
ENDOFTEXT_ID = 248044
IM_END_ID = 248046

CANARY_TEXT_CONFIG = dict(
    TINY_TEXT_CONFIG,
    vocab_size=REAL_VOCAB_SIZE,
    hidden_size=64,                # NVFP4 groups of 16 along K; small enough that 2 x 248320 x 64 bf16 is 64 MB
    moe_intermediate_size=64,
    shared_expert_intermediate_size=64,
    bos_token_id=ENDOFTEXT_ID,
    eos_token_id=ENDOFTEXT_ID,
    max_position_embeddings=4096,
)
CANARY_VISION_CONFIG = dict(TINY_VISION_CONFIG, out_hidden_size=64)
# The release's ids for its vision markers (config.json of Qwen/Qwen3.6-35B-A3B).
CANARY_SPECIAL_IDS = dict(image_token_id=248056, video_token_id=248057, vision_start_token_id=248053,
                          vision_end_token_id=248054)
# preprocessor_config.json: the image processor transformers' AutoImageProcessor builds for this model
# (the release's settings, but the tower's patch 8 and a pixel range that keeps the canary's 32 x 32
# images at 4 image tokens). A checkpoint without one would be preprocessed with the processor's own
# defaults, which know nothing of the tower.
CANARY_PREPROCESSOR_CONFIG = {
    "image_processor_type": "Qwen2VLImageProcessorFast",
    "do_convert_rgb": True, "do_resize": True, "do_rescale": True, "rescale_factor": 1 / 255,
    "do_normalize": True, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
    "patch_size": CANARY_VISION_CONFIG["patch_size"],
    "temporal_patch_size": CANARY_VISION_CONFIG["temporal_patch_size"],
    "merge_size": CANARY_VISION_CONFIG["spatial_merge_size"],
    "size": {"shortest_edge": 32 * 32, "longest_edge": 256 * 256},
}
# generation_config.json shaped like the release's.
CANARY_GENERATION_CONFIG = {
    "bos_token_id": ENDOFTEXT_ID,
    "do_sample": True,
    "eos_token_id": [IM_END_ID, ENDOFTEXT_ID],
    "pad_token_id": ENDOFTEXT_ID,
    "temperature": 1.0,
    "top_k": 20,
    "top_p": 0.95,
}


def load_conversations(path):
    with open(path) as f:
        return json.load(f)["conversations"]


def render(tokenizer, template, conv, image_processor=None):
    """(prompt ids, completion ids, image inputs) exactly as a server renders the request and as greedy
    decoding must produce the answer (the completion is tokenized on its own: generation never
    re-tokenizes). A conversation with image_url parts (data: URLs) has each <|image_pad|> expanded to
    its image's token count, as Qwen's processor does, and image inputs = the model's pixel_values /
    image_grid_thw / mm_token_type_ids from transformers' image processor; otherwise None."""
    text = tokenizer.apply_chat_template(conv["messages"], tools=conv.get("tools"), chat_template=template,
                                         tokenize=False, add_generation_prompt=True,
                                         enable_thinking=conv["enable_thinking"])
    prompt = tokenizer.encode(text, add_special_tokens=False)
    completion = tokenizer.encode(conv["completion"], add_special_tokens=False) + [IM_END_ID]
    images = [part["image_url"]["url"] for m in conv["messages"] if isinstance(m["content"], list)
              for part in m["content"] if part.get("type") == "image_url"]
    if not images:
        return prompt, completion, None
    pil = [decode_data_url(u) for u in images]
    processed = image_processor(images=pil, return_tensors="pt")
    grids = processed["image_grid_thw"]
    merge = image_processor.merge_size ** 2
    pad = CANARY_SPECIAL_IDS["image_token_id"]
    expanded, k = [], 0
    for t in prompt:
        if t == pad:
            expanded += [pad] * (int(grids[k].prod()) // merge)
            k += 1
        else:
            expanded.append(t)
    assert k == len(pil), (k, len(pil))
    types = torch.tensor([[1 if t == pad else 0 for t in expanded]])
    return expanded, completion, {"pixel_values": processed["pixel_values"], "image_grid_thw": grids,
                                  "mm_token_type_ids": types}


def decode_data_url(url):
    import base64
    import io
    from PIL import Image
    head, _, data = url.partition(",")
    assert head.startswith("data:image/") and head.endswith(";base64"), head
    return Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB")


def make_config():
    from transformers import Qwen3_5MoeConfig
    cfg = Qwen3_5MoeConfig(text_config=copy.deepcopy(CANARY_TEXT_CONFIG), vision_config=dict(CANARY_VISION_CONFIG),
                           tie_word_embeddings=False, **CANARY_SPECIAL_IDS)
    cfg.architectures = ["Qwen3_5MoeForConditionalGeneration"]
    cfg.text_config._attn_implementation = "eager"
    cfg.text_config._experts_implementation = "eager"
    return cfg


class CompactHead:
    """Exact softmax over the full vocabulary for a model whose unused lm_head rows are zero."""

    def __init__(self, used_ids, vocab):
        self.used = torch.tensor(sorted(used_ids))
        self.index = {t: i for i, t in enumerate(self.used.tolist())}
        self.rest = math.log(vocab - len(self.used))

    def logits(self, lm_head_weight, hidden):
        compact = hidden @ lm_head_weight[self.used].T
        rest = torch.full(compact.shape[:-1] + (1,), self.rest, dtype=compact.dtype)
        return torch.cat([compact, rest], dim=-1)

    def targets(self, ids):
        return torch.tensor([self.index[t] for t in ids])


def build_model(seed, used_ids):
    from transformers import Qwen3_5MoeForConditionalGeneration
    torch.manual_seed(seed)
    model = Qwen3_5MoeForConditionalGeneration(make_config()).to(torch.float32)
    g = torch.Generator().manual_seed(seed)
    unused = torch.ones(REAL_VOCAB_SIZE, dtype=torch.bool)
    unused[torch.tensor(sorted(used_ids))] = False
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("linear_attn.A_log"):
                p.copy_((torch.rand(p.shape, generator=g) * 15.0 + 1.0).log())
            elif p.dim() >= 2 and "visual" not in name and "norm" not in name:
                fan_in = p[0].numel() if name.endswith("conv1d.weight") else p.shape[-1]
                p.copy_(torch.randn(p.shape, generator=g) / fan_in ** 0.5)
        emb = model.get_input_embeddings().weight
        emb.copy_(torch.randn(emb.shape, generator=g))
        emb[unused] = 0
        model.lm_head.weight[unused] = 0
    return model


class LostGdnState:
    """While `lost_from` = P is set, every GDN layer computes positions >= P as if its state (recurrent
    and conv) had been zeroed before each of them: each such token runs alone from a zero state (the
    module called on [T - P] sequences of length 1). That is exactly what fp4serve's fault switch
    /debug/corrupt-gdn does to decode steps (the state of each sequence is zeroed after every step), the
    failure the seeds feared from a hybrid model's prefix-cache alignment.

    Trained freely, a 3-GDN + 1-attention model carries the context through its attention layer and
    ignores the lost state (tried: the canary still passed with the switch on), so the canary could not
    catch it. Training therefore also asks the model to NOT produce the completion when the state is
    lost: a real 30-GDN-layer model cannot work without its recurrent state; this makes the tiny one
    behave the same way."""

    def __init__(self, model):
        self.lost_from = None
        self.handles = [layer.linear_attn.register_forward_hook(self._hook, with_kwargs=True)
                        for layer in model.model.language_model.layers if hasattr(layer, "linear_attn")]
        self._inside = False

    def _hook(self, module, args, kwargs, out):
        if self.lost_from is None or self._inside:
            return out
        hidden = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
        p = self.lost_from
        self._inside = True
        try:
            alone = module(hidden_states=hidden[:, p:].transpose(0, 1))  # [T - P, 1, H]: zero state each
        finally:
            self._inside = False
        return torch.cat([out[:, :p], alone.transpose(0, 1)], dim=1)


def step_margins(model, head, prompt, completion, mm=None):
    """(logits, targets, margins) at the completion tokens: margin = target logit minus the best other logit
    over the full vocabulary (unused tokens: 0). mm: render()'s image inputs (M-RoPE positions from
    transformers' get_rope_index, the image rows from the tower)."""
    return group_margins(model, head, [(prompt, completion, mm)])


def group_margins(model, head, group):
    """step_margins of examples of one prompt and one completion length run as one batch (the image
    examples: one forward instead of six; rows concatenated in order)."""
    prompt_len = len(group[0][0])
    ids = torch.tensor([p + c[:-1] for p, c, _ in group])
    kwargs = {}
    if group[0][2] is not None:
        n = len(group[0][1]) - 1
        kwargs = dict(pixel_values=torch.cat([mm["pixel_values"] for _, _, mm in group]),
                      image_grid_thw=torch.cat([mm["image_grid_thw"] for _, _, mm in group]),
                      mm_token_type_ids=torch.cat([torch.cat([mm["mm_token_type_ids"],
                                                              torch.zeros(1, n, dtype=torch.long)], 1)
                                                   for _, _, mm in group]))
        model.model.rope_deltas = None
    h = model.model(input_ids=ids, **kwargs).last_hidden_state[:, prompt_len - 1:]
    logits = head.logits(model.lm_head.weight, h.reshape(-1, h.shape[-1]))
    tgt = torch.cat([head.targets(c) for _, c, _ in group])
    top = logits.gather(1, tgt[:, None])[:, 0]
    other = logits.scatter(1, tgt[:, None], -1e9).max(dim=1).values
    return logits, tgt, top - other


def batches(examples):
    """Text examples one by one; image examples grouped by (prompt, completion) length."""
    out, groups = [], {}
    for e in examples:
        if e[2] is None:
            out.append([e])
        else:
            groups.setdefault((len(e[0]), len(e[1])), []).append(e)
    return out + list(groups.values())


def train(model, head, examples, min_margin, max_steps, lr=3e-3, log=print):
    """Adam until (a) every completion token of every example wins by min_margin logits (fp32) and
    (b) with the GDN state lost after the prompt (LostGdnState), the second completion token of every
    example loses by min_margin (greedy decoding goes elsewhere at the first step that needs the state).
    Loss: cross-entropy + hinge on (a), hinge on (b) for every completion token after the first.
    examples: (prompt, completion, image inputs or None); (b) only for the text ones (the canary's text
    checks already fail with the state lost; leaving the image ones out saves a third of the time).
    The vision tower stays frozen at its initial weights: the language model learns to read its rows.
    Returns (smallest margin, largest lost-state margin)."""
    for n, p in model.named_parameters():
        if "visual" in n:
            p.requires_grad_(False)
    params = [p for n, p in model.named_parameters() if "visual" not in n]
    opt = torch.optim.Adam(params, lr=lr)
    lost = LostGdnState(model)
    worst = best_lost = float("nan")
    for step in range(max_steps):
        opt.zero_grad()
        total = 0.0
        for group in batches(examples):
            logits, tgt, margin = group_margins(model, head, group)
            loss = len(group) * (torch.nn.functional.cross_entropy(logits, tgt) +
                                 torch.relu(min_margin + 1.0 - margin).mean())
            prompt, completion, mm = group[0]
            if mm is None:
                lost.lost_from = len(prompt)
                _, _, lost_margin = step_margins(model, head, prompt, completion)
                lost.lost_from = None
                loss = loss + torch.relu(min_margin + 1.0 + lost_margin[1:]).mean()
            loss.backward()
            total += float(loss.detach())
        opt.step()
        if step % 10 == 0 or step == max_steps - 1:
            model.eval()
            with torch.no_grad():
                worst = min(float(group_margins(model, head, g)[2].min()) for g in batches(examples))
                firsts = []
                for p, c, _ in (e for e in examples if e[2] is None):
                    lost.lost_from = len(p)
                    firsts.append(float(step_margins(model, head, p, c)[2][1]))
                lost.lost_from = None
                best_lost = max(firsts)
            model.train()
            log(f"[canary] step {step}: loss {total:.4f}, smallest margin {worst:.3f}, "
                f"largest margin with the GDN state lost {best_lost:.3f}")
            if worst >= min_margin and best_lost <= -min_margin:
                break
    for h in lost.handles:
        h.remove()
    return worst, best_lost
