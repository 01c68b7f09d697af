"""Tiny random Qwen3.5-MoE (qwen3_5_moe) model built with transformers' own classes.

Every structural property of Qwen3.6-35B-A3B is kept (3:1 GDN/attention pattern, GQA, gated q_proj,
partial interleaved mRoPE, Hv = 2*Hk linear heads, conv kernel 4, routed top-k experts + gated shared
expert, untied lm_head); only widths are reduced so that four checkpoint formats fit in a few MB.
Widths are chosen so that every quantization block is meaningful:
  hidden 256       -> 2 FP8 128x128 blocks and 2 INT4 groups of 128 along K, 16 NVFP4 groups of 16
  moe/shared 128   -> down_proj K = 128: one FP8 block / INT4 group, 8 NVFP4 groups
"""
import torch

# Sizes of the tiny model. Changing any of these changes every golden: regenerate everything.
TINY_TEXT_CONFIG = dict(
    vocab_size=512,           # tiny models are driven by token ids, not text
    hidden_size=256,
    num_hidden_layers=4,
    layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"],
    full_attention_interval=4,
    num_attention_heads=4,    # GQA ratio 2 (real model: 16 / 2 = 8)
    num_key_value_heads=2,
    head_dim=64,              # rotary dim = 64 * 0.25 = 16 -> 8 frequencies = mrope [3, 3, 2]
    attn_output_gate=True,
    attention_bias=False,
    linear_num_key_heads=4,   # Hv = 2 * Hk as in the real model (16 / 32)
    linear_num_value_heads=8,
    linear_key_head_dim=32,
    linear_value_head_dim=32,
    linear_conv_kernel_dim=4,
    num_experts=8,
    num_experts_per_tok=2,
    moe_intermediate_size=128,
    shared_expert_intermediate_size=128,
    hidden_act="silu",
    rms_norm_eps=1e-6,
    max_position_embeddings=4096,
    initializer_range=0.02,
    tie_word_embeddings=False,
    bos_token_id=500,
    eos_token_id=500,
    pad_token_id=None,
    mamba_ssm_dtype="float32",
    mtp_num_hidden_layers=0,
    mtp_use_dedicated_embeddings=False,
    router_aux_loss_coef=0.001,
    rope_parameters={
        "mrope_interleaved": True,
        "mrope_section": [3, 3, 2],
        "partial_rotary_factor": 0.25,
        "rope_theta": 10000000,
        "rope_type": "default",
    },
    partial_rotary_factor=0.25,
)

# A tiny vision tower so the checkpoint carries model.visual.* tensors (loaders must skip them),
# laid out like the release's vision_config.
TINY_VISION_CONFIG = dict(
    depth=1,
    hidden_size=16,
    hidden_act="gelu_pytorch_tanh",
    intermediate_size=32,
    num_heads=2,
    in_channels=3,
    patch_size=8,
    spatial_merge_size=2,
    temporal_patch_size=2,
    out_hidden_size=256,
    num_position_embeddings=16,
    deepstack_visual_indexes=[],
    initializer_range=0.02,
)

# Token ids of the special tokens in the tiny vocabulary (ids >= 500 play the role of the
# release's added tokens; prompts use ids < 500).
TINY_SPECIAL_IDS = dict(image_token_id=501, video_token_id=502, vision_start_token_id=503,
                        vision_end_token_id=504)


def make_configs():
    """Returns (full Qwen3_5MoeConfig, text Qwen3_5MoeTextConfig)."""
    from transformers import Qwen3_5MoeConfig, Qwen3_5MoeTextConfig
    text = Qwen3_5MoeTextConfig(**TINY_TEXT_CONFIG)
    full = Qwen3_5MoeConfig(text_config=dict(TINY_TEXT_CONFIG), vision_config=dict(TINY_VISION_CONFIG),
                            tie_word_embeddings=False, **TINY_SPECIAL_IDS)
    return full, text


def randomize_(model, seed):
    """Deterministic random weights that make every op matter.

    Linear weights ~ N(0, 0.02) would leave a 4-layer model close to the identity; we use a larger
    std for projections so activations stay O(1), and random (non-default) values for every norm,
    A_log, dt_bias and conv weight so that a wrong (1+w) vs w, a missing conv tap or a wrong decay
    shows up in the logits.
    """
    g = torch.Generator().manual_seed(seed)

    def normal(t, std, mean=0.0):
        return (torch.randn(t.shape, generator=g, dtype=torch.float32) * std + mean).to(t.dtype)

    with torch.no_grad():
        for name, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            if name.endswith("linear_attn.A_log"):
                # A in [1, 16) like HF's init (uniform(0,16).log()), avoiding tiny A.
                a = torch.rand(p.shape, generator=g) * 15.0 + 1.0
                p.copy_(a.log().to(p.dtype))
            elif name.endswith("linear_attn.dt_bias"):
                p.copy_(normal(p, 0.5, 1.0))
            elif name.endswith("linear_attn.norm.weight"):      # plain w (~1)
                p.copy_(normal(p, 0.2, 1.0))
            elif name.endswith("conv1d.weight"):
                p.copy_(normal(p, 0.4))
            elif "norm" in name and name.endswith("weight") and "visual" not in name:  # (1 + w) norms
                p.copy_(normal(p, 0.2))
            elif name.endswith("embed_tokens.weight"):
                p.copy_(normal(p, 1.0))
            elif name.endswith("mlp.gate.weight"):               # router: make routing decisive
                p.copy_(normal(p, 0.15))
            elif p.dim() >= 2 or name.endswith("experts.gate_up_proj") or name.endswith("experts.down_proj"):
                fan_in = p.shape[-1] if p.dim() >= 2 else 1
                if name.endswith("conv1d.weight") or "patch_embed" in name:
                    fan_in = p[0].numel()
                p.copy_(normal(p, 1.0 / fan_in ** 0.5))
            else:  # biases and other vectors (vision tower)
                p.copy_(normal(p, 0.02))
    add_bigram_prior_(model, seed)
    return model


# Strength of the bigram prior written into lm_head (see add_bigram_prior_): the prior rows are
# embedding rows scaled to the random lm_head rows' scale 1/sqrt(hidden), times this gain. Measured on
# this model, transformers bf16 vs f32, 64 greedy steps per prompt, prompts of lengths 1/7/33/100:
#   gain 0 (random head): 2-9% of steps pick a different token, margins reach 0.00;
#   gain 0.7: the prior decides 92-100% of steps; the context-decided ones mostly have margins < 0.35
#             and 4 of 12 prompts flip; no prompt has all margins >= 0.35 (greedy_margins.py);
#   gain 1.0: the prior decides 98-100% of steps, no flips, per-prompt minimum margins 0.36-1.39.
# There is no gain in between where context decides many steps with clear margins: a step decided
# against the prior is one where the two nearly balance. The greedy tokens therefore follow the
# prior; what the context does is checked through the logits (fp4serve's golden tests).
LM_HEAD_BIGRAM_GAIN = 1.0


def add_bigram_prior_(model, seed):
    """lm_head row pi(a) = (random row + gain * embedding row a / sqrt(hidden)) / sqrt(1 + gain^2),
    for a seeded permutation pi of the vocabulary.

    A random untied lm_head gives Gaussian logits whose top-2 gap is often far below the bf16
    rounding noise of the final hidden state (~1.5% relative after 4 layers here), so greedy decoding
    flips between any two correct bf16 implementations (transformers' own bf16 and f32 runs disagree
    on 2-9% of steps). Scaling lm_head or the init does not help: every block is normalized, so the
    noise scales with the logits. A trained model's top token stands out from the rest; the residual
    stream carries the current token's embedding, so adding it (permuted) to lm_head makes
    "a -> pi(a)" stand out the same way while every other logit stays a random function of the
    context. The 1/sqrt(1 + gain^2) keeps the logits' spread over the vocabulary (~1.0) as without
    the prior, so logit tolerances keep their meaning. The
    permutation has its own generator: every other weight is as without the prior."""
    lm = model.lm_head.weight
    emb = model.get_input_embeddings().weight
    g = torch.Generator().manual_seed(seed + 1)
    perm = torch.randperm(emb.shape[0], generator=g)
    with torch.no_grad():
        prior = torch.empty_like(lm, dtype=torch.float32)
        prior[perm] = LM_HEAD_BIGRAM_GAIN / emb.shape[1] ** 0.5 * emb.float()
        lm.copy_(((lm.float() + prior) / (1.0 + LM_HEAD_BIGRAM_GAIN ** 2) ** 0.5).to(lm.dtype))


# generation_config.json of the tiny checkpoints, shaped like the release's (eos = [im_end, endoftext]).
TINY_ENDOFTEXT_ID = 500
TINY_IM_END_ID = 505
TINY_GENERATION_CONFIG = {
    "bos_token_id": TINY_ENDOFTEXT_ID,
    "do_sample": True,
    "eos_token_id": [TINY_IM_END_ID, TINY_ENDOFTEXT_ID],
    "pad_token_id": TINY_ENDOFTEXT_ID,
    "temperature": 1.0,
    "top_k": 20,
    "top_p": 0.95,
}

# Parameters the BF16 release stores in float32 (docs/model-arch.md §2.2, [CENSUS]).
F32_PARAM_SUFFIXES = ("linear_attn.A_log", "linear_attn.norm.weight")


def build_master_model(seed):
    """The float32 master model all formats derive from (random init in fp32, before any rounding)."""
    from transformers import Qwen3_5MoeForConditionalGeneration
    full_cfg, _ = make_configs()
    full_cfg.architectures = ["Qwen3_5MoeForConditionalGeneration"]
    torch.manual_seed(seed)
    model = Qwen3_5MoeForConditionalGeneration(full_cfg).to(torch.float32)
    randomize_(model, seed)
    return model.eval()
