#!/usr/bin/env python3
"""Writes the config fixtures under tests/data/configs/ (stdlib only; run from anywhere).

    python3 tools/reference/make_config_fixtures.py

What is a faithful copy and what is reconstructed is listed in tests/data/configs/README.md.
Sources: docs/model-arch.md §1.1 (the published Qwen/Qwen3.6-35B-A3B config.json
and generation_config.json), §1.2 (Qwen3-Next), docs/quant-formats.md §2 (ModelOpt
hf_quant_config.json / quantization_config, the NVFP4 recipe for qwen3_5_moe), and the model cards of
the FP8, AutoRound and GPTQ releases.
"""
import copy
import json
import pathlib

OUT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data" / "configs"
LAYERS = 40
FULL = [l for l in range(LAYERS) if (l + 1) % 4 == 0]
GDN = [l for l in range(LAYERS) if (l + 1) % 4 != 0]
P = "model.language_model.layers."


def write(name, obj):
    path = OUT / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2) + "\n")


# --- Qwen/Qwen3.6-35B-A3B config.json (docs/model-arch.md §1.1, [CFG36]) --------------------------
QWEN36 = {
    "architectures": ["Qwen3_5MoeForConditionalGeneration"],
    "image_token_id": 248056,
    "model_type": "qwen3_5_moe",
    "text_config": {
        "attention_bias": False,
        "attention_dropout": 0.0,
        "attn_output_gate": True,
        "bos_token_id": 248044,
        "dtype": "bfloat16",
        "eos_token_id": 248044,
        "full_attention_interval": 4,
        "head_dim": 256,
        "hidden_act": "silu",
        "hidden_size": 2048,
        "initializer_range": 0.02,
        "layer_types": ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(LAYERS)],
        "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 128,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 32,
        "linear_value_head_dim": 128,
        "mamba_ssm_dtype": "float32",
        "max_position_embeddings": 262144,
        "model_type": "qwen3_5_moe_text",
        "moe_intermediate_size": 512,
        "mtp_num_hidden_layers": 1,
        "mtp_use_dedicated_embeddings": False,
        "num_attention_heads": 16,
        "num_experts": 256,
        "num_experts_per_tok": 8,
        "num_hidden_layers": LAYERS,
        "num_key_value_heads": 2,
        "pad_token_id": None,
        "partial_rotary_factor": 0.25,
        "rms_norm_eps": 1e-06,
        "rope_parameters": {
            "mrope_interleaved": True,
            "mrope_section": [11, 11, 10],
            "partial_rotary_factor": 0.25,
            "rope_theta": 10000000,
            "rope_type": "default",
        },
        "router_aux_loss_coef": 0.001,
        "shared_expert_intermediate_size": 512,
        "use_cache": True,
        "vocab_size": 248320,
    },
    "tie_word_embeddings": False,
    "transformers_version": "4.57.1",
    "video_token_id": 248057,
    "vision_config": {
        "deepstack_visual_indexes": [],
        "depth": 27,
        "hidden_act": "gelu_pytorch_tanh",
        "hidden_size": 1152,
        "in_channels": 3,
        "initializer_range": 0.02,
        "intermediate_size": 4304,
        "model_type": "qwen3_5_moe",
        "num_heads": 16,
        "num_position_embeddings": 2304,
        "out_hidden_size": 2048,
        "patch_size": 16,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
    },
    "vision_end_token_id": 248054,
    "vision_start_token_id": 248053,
}

QWEN36_GENERATION = {
    "bos_token_id": 248044,
    "do_sample": True,
    "eos_token_id": [248046, 248044],
    "pad_token_id": 248044,
    "temperature": 1.0,
    "top_k": 20,
    "top_p": 0.95,
    "transformers_version": "4.57.1",
}

# --- Qwen3-Next-80B-A3B style flat config (docs/model-arch.md §1.2; old-style rope fields) --------
QWEN3_NEXT = {
    "architectures": ["Qwen3NextForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "decoder_sparse_step": 1,
    "eos_token_id": 151645,
    "full_attention_interval": 4,
    "head_dim": 256,
    "hidden_act": "silu",
    "hidden_size": 2048,
    "initializer_range": 0.02,
    "intermediate_size": 5120,
    "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 128,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
    "linear_value_head_dim": 128,
    "max_position_embeddings": 262144,
    "mlp_only_layers": [],
    "model_type": "qwen3_next",
    "moe_intermediate_size": 512,
    "norm_topk_prob": True,
    "num_attention_heads": 16,
    "num_experts": 512,
    "num_experts_per_tok": 10,
    "num_hidden_layers": 48,
    "num_key_value_heads": 2,
    "output_router_logits": False,
    "partial_rotary_factor": 0.25,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 10000000,
    "router_aux_loss_coef": 0.001,
    "shared_expert_intermediate_size": 512,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.57.0.dev0",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 151936,
}


# --- nvidia/Qwen3.6-35B-A3B-NVFP4 (docs/quant-formats.md §2.2-2.3, reconstructed) -----------------
def nvfp4_quantized_layers():
    w4a16 = {"quant_algo": "W4A16_NVFP4", "group_size": 16}
    fp8 = {"quant_algo": "FP8"}
    layers = {}
    for l in range(LAYERS):
        if l in FULL:
            for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
                layers[f"{P}{l}.self_attn.{proj}"] = dict(fp8)
        else:
            for proj in ("in_proj_qkv", "in_proj_z", "out_proj"):
                layers[f"{P}{l}.linear_attn.{proj}"] = dict(fp8)
        layers[f"{P}{l}.mlp.experts"] = dict(w4a16)
        for proj in ("gate_proj", "up_proj", "down_proj"):
            layers[f"{P}{l}.mlp.shared_expert.{proj}"] = dict(w4a16)
    layers["lm_head"] = dict(w4a16)
    return dict(sorted(layers.items()))


def nvfp4_configs():
    ql = nvfp4_quantized_layers()
    w4a16_targets = sorted(k for k, v in ql.items() if v["quant_algo"] == "W4A16_NVFP4")
    fp8_targets = sorted(k for k, v in ql.items() if v["quant_algo"] == "FP8")
    producer = {"name": "modelopt", "version": "0.43.0"}
    quantization_config = {
        "config_groups": {
            "group_0": {
                # The published artifact declares 4-bit inputs on its W4A16 group (R0B audit); the
                # current exporter writes weights only. Kept here to show it is ignored.
                "input_activations": {"dynamic": False, "num_bits": 4, "type": "float", "group_size": 16},
                "weights": {"dynamic": False, "num_bits": 4, "type": "float", "group_size": 16},
                "targets": w4a16_targets,
            },
            "group_1": {
                "input_activations": {"dynamic": False, "num_bits": 8, "type": "float"},
                "weights": {"dynamic": False, "num_bits": 8, "type": "float"},
                "targets": fp8_targets,
            },
        },
        "ignore": [],
        "kv_cache_scheme": {"dynamic": False, "num_bits": 8, "type": "float"},
        "producer": producer,
        "quant_algo": "MIXED_PRECISION",
        "quant_method": "modelopt",
        "quantized_layers": ql,
    }
    hf_quant = {
        "producer": producer,
        "quantization": {
            "quant_algo": "MIXED_PRECISION",
            "kv_cache_quant_algo": "FP8",
            "quantized_layers": ql,
        },
    }
    config = copy.deepcopy(QWEN36)
    config["quantization_config"] = quantization_config
    return config, hf_quant


# --- Qwen/Qwen3.6-35B-A3B-FP8 (block FP8; modules_to_not_convert reconstructed from the census) -----
def fp8_config():
    keep = ["lm_head"]
    for l in range(LAYERS):
        keep.append(f"{P}{l}.mlp.gate")
        keep.append(f"{P}{l}.mlp.shared_expert_gate")
        if l in GDN:
            keep.append(f"{P}{l}.linear_attn.in_proj_a")
            keep.append(f"{P}{l}.linear_attn.in_proj_b")
    keep += ["model.visual", "mtp.fc", "mtp.layers.0.mlp.gate", "mtp.layers.0.mlp.shared_expert_gate"]
    config = copy.deepcopy(QWEN36)
    config["quantization_config"] = {
        "activation_scheme": "dynamic",
        "fmt": "e4m3",
        "modules_to_not_convert": keep,
        "quant_method": "fp8",
        "weight_block_size": [128, 128],
    }
    return config


# --- An AutoRound INT4 release of Qwen3.6-35B-A3B ---------------------------------------------------
# Field order and the {"bits": 16, "data_type": "fp"} spelling follow a real auto-round 0.12.3 export
# of a Qwen3.5 model; the module list follows nchapman's Qwen3.6-35B-A3B-int4-AutoRound card (router,
# shared expert, shared_expert_gate, in_proj_a/b plus vLLM's fused in_proj_ba kept in bf16).
def autoround_section():
    extra = {}
    for l in range(LAYERS):
        if l in GDN:
            for proj in ("in_proj_b", "in_proj_a", "in_proj_ba"):
                extra[f"{P}{l}.linear_attn.{proj}"] = {"bits": 16, "data_type": "fp"}
        extra[f"{P}{l}.mlp.gate"] = {"bits": 16, "data_type": "fp"}
        extra[f"{P}{l}.mlp.shared_expert_gate"] = {"bits": 16, "data_type": "fp"}
        for proj in ("gate_proj", "up_proj", "down_proj"):
            extra[f"{P}{l}.mlp.shared_expert.{proj}"] = {"bits": 16, "data_type": "fp"}
    return {
        "bits": 4,
        "data_type": "int",
        "group_size": 128,
        "sym": True,
        "iters": 400,
        "nsamples": 256,
        "seqlen": 2048,
        "autoround_version": "0.12.2",
        "block_name_to_quantize": "model.language_model.layers",
        "quant_method": "auto-round",
        "packing_format": "auto_round:auto_gptq",
        "extra_config": extra,
    }


def autoround_config():
    config = copy.deepcopy(QWEN36)
    config["quantization_config"] = autoround_section()
    return config


# --- A GPTQ (GPTQModel) INT4 release quantizing the routed experts only -----------------------------
def gptq_config():
    config = copy.deepcopy(QWEN36)
    config["quantization_config"] = {
        "bits": 4,
        "checkpoint_format": "gptq",
        "damp_percent": 0.01,
        "desc_act": False,
        "dynamic": {
            "-:.*\\.self_attn\\..*": {},
            "-:.*\\.linear_attn\\..*": {},
            "-:.*\\.shared_expert.*": {},
            "-:.*\\.mlp\\.gate$": {},
            "-:^mtp\\..*": {},
            "-:^model\\.visual\\..*": {},
        },
        "group_size": 128,
        "lm_head": False,
        "meta": {"quantizer": ["gptqmodel:4.2.5"], "uri": "https://github.com/modelcloud/gptqmodel"},
        "pack_dtype": "int32",
        "quant_method": "gptq",
        "static_groups": False,
        "sym": True,
        "true_sequential": True,
    }
    return config


def main():
    write("qwen3_6_35b_a3b/config.json", QWEN36)
    write("qwen3_6_35b_a3b/generation_config.json", QWEN36_GENERATION)
    write("qwen3_next_80b_a3b/config.json", QWEN3_NEXT)
    nv_config, nv_hf = nvfp4_configs()
    write("qwen3_6_35b_a3b_nvfp4/config.json", nv_config)
    write("qwen3_6_35b_a3b_nvfp4/hf_quant_config.json", nv_hf)
    write("qwen3_6_35b_a3b_fp8/config.json", fp8_config())
    write("qwen3_6_35b_a3b_autoround/config.json", autoround_config())
    write("qwen3_6_35b_a3b_gptq/config.json", gptq_config())


if __name__ == "__main__":
    main()
