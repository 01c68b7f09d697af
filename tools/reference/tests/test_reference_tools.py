"""Checks that need the reference stack (torch, transformers, nvidia-modelopt, auto-round).
Selected with `pytest tools/reference/tests -m reference` (see conftest.py)."""
import os
import tempfile

import numpy as np
import pytest

from dequant import dequant_nvfp4, load_dense_text_state
from safetensors_np import E4M3_LUT, load_checkpoint_raw
from tiny_checkpoints import golden_array, load_goldens, model_dir, read_json

pytestmark = pytest.mark.reference


def test_e4m3_table_matches_torch():
    import torch
    b = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    t = b.view(torch.float8_e4m3fn).to(torch.float32).numpy()
    np.testing.assert_array_equal(np.isnan(t), np.isnan(E4M3_LUT))
    ok = ~np.isnan(t)
    np.testing.assert_array_equal(t[ok], E4M3_LUT[ok])


def test_nvfp4_dequant_matches_modelopt():
    """Our numpy NVFP4 dequantization == ModelOpt's NVFP4QTensor.dequantize, bit for bit, on every
    NVFP4 module of the committed checkpoint."""
    import torch
    from modelopt.torch.quantization.qtensor import NVFP4QTensor
    raw = load_checkpoint_raw(model_dir("nvfp4"))
    mods = [k[: -len(".weight_scale_2")] for k in raw if k.endswith(".weight_scale_2")]
    assert len(mods) > 10
    for mod in mods:
        w = raw[mod + ".weight"][2]
        s = raw[mod + ".weight_scale"][2]
        s2 = raw[mod + ".weight_scale_2"][2].reshape(())
        qt = NVFP4QTensor(torch.Size([w.shape[0], w.shape[1] * 2]), torch.float32, torch.from_numpy(w.copy()))
        ref = qt.dequantize(dtype=torch.float32, scale=torch.from_numpy(s.copy()).view(torch.float8_e4m3fn),
                            double_scale=torch.tensor(float(s2), dtype=torch.float32), block_sizes={-1: 16})
        np.testing.assert_array_equal(dequant_nvfp4(w, s, s2), ref.numpy(), err_msg=mod)


def test_fp8_block_export_is_reproducible():
    """Re-running the block-FP8 exporter on the committed BF16 checkpoint gives the committed bytes."""
    from export_fp8_block import export_fp8_block
    with tempfile.TemporaryDirectory() as tmp:
        export_fp8_block(model_dir("bf16"), tmp)
        a, b = load_checkpoint_raw(tmp), load_checkpoint_raw(model_dir("fp8"))
        assert set(a) == set(b)
        for k in a:
            np.testing.assert_array_equal(a[k][2], b[k][2], err_msg=k)
        assert read_json(os.path.join(tmp, "config.json")) == read_json(os.path.join(model_dir("fp8"), "config.json"))


@pytest.mark.parametrize("fmt", ["bf16", "nvfp4"])
def test_goldens_reproduce(fmt):
    """The stored prefill logits are reproduced bit for bit from the committed weights."""
    import torch
    from goldens import build_causal_lm
    torch.set_num_threads(1)
    doc, blob = load_goldens(fmt)
    cfg = read_json(os.path.join(model_dir(fmt), "config.json"))["text_config"]
    model = build_causal_lm(cfg, load_dense_text_state(model_dir(fmt)), torch.bfloat16)
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([doc["prompts"][2]])).logits[0].float().numpy()
    np.testing.assert_array_equal(logits, golden_array(doc, blob, "prompt2/bf16/logits"))


def test_bf16_checkpoint_loads_with_from_pretrained():
    import torch
    from transformers import Qwen3_5MoeForConditionalGeneration
    doc, blob = load_goldens("bf16")
    model = Qwen3_5MoeForConditionalGeneration.from_pretrained(
        model_dir("bf16"), dtype=torch.bfloat16, attn_implementation="eager", experts_implementation="eager").eval()
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([doc["prompts"][3]])).logits[0].float().numpy()
    np.testing.assert_array_equal(logits, golden_array(doc, blob, "prompt3/bf16/logits"))


@pytest.mark.parametrize("fmt", ["fp8", "int4"])
def test_transformers_own_loader_matches_goldens(fmt):
    """transformers' own loaders read our FP8 (FineGrainedFP8, dequantized to bf16 on CPU) and INT4
    (AutoRound's CPU backend auto_round:torch_zp) checkpoints and reproduce the bf16-run goldens
    bit for bit: an independent check of scale semantics, nibble order, zero points and names."""
    import torch
    from transformers import Qwen3_5MoeForConditionalGeneration
    torch.set_num_threads(1)
    doc, blob = load_goldens(fmt)
    model = Qwen3_5MoeForConditionalGeneration.from_pretrained(
        model_dir(fmt), dtype=torch.bfloat16, attn_implementation="eager", experts_implementation="eager",
        device_map="cpu").eval()
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([doc["prompts"][2]])).logits[0].float().numpy()
    np.testing.assert_array_equal(logits, golden_array(doc, blob, "prompt2/bf16/logits"))
