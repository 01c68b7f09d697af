"""Torch-free unit tests of the numpy dequantization formulas against hand-computed vectors
(docs/quant-formats.md §6) and synthetic layouts (ceil-div FP8 blocks, GPTQ nibble order)."""
import numpy as np

from dequant import dequant_fp8_block, dequant_gptq_int4, dequant_nvfp4, unpack_nvfp4
from safetensors_np import E4M3_LUT


def test_e4m3_spot_values():
    expect = {0x00: 0.0, 0x01: 2.0 ** -9, 0x07: 0.013671875, 0x08: 0.015625, 0x30: 0.5, 0x38: 1.0,
              0x3C: 1.5, 0x40: 2.0, 0x48: 4.0, 0x5D: 26.0, 0x6D: 104.0, 0x7A: 320.0, 0x7E: 448.0,
              0xB8: -1.0, 0xFE: -448.0}
    for byte, value in expect.items():
        assert E4M3_LUT[byte] == np.float32(value), hex(byte)
    assert np.isnan(E4M3_LUT[0x7F]) and np.isnan(E4M3_LUT[0xFF])
    assert E4M3_LUT[0x80] == 0.0 and np.signbit(E4M3_LUT[0x80])


def test_nvfp4_block_vector_from_spec():
    # docs/quant-formats.md §6.3: packed C1 F6 30 7D 58 3E 97 E5, block scale 0x6D (104), s2 = 0.5/2688
    packed = np.array([[0xC1, 0xF6, 0x30, 0x7D, 0x58, 0x3E, 0x97, 0xE5]], dtype=np.uint8)
    nibbles = unpack_nvfp4(packed)[0]
    assert [int(n) for n in nibbles] == [1, 0xC, 6, 0xF, 0, 3, 0xD, 7, 8, 5, 0xE, 3, 7, 9, 5, 0xE]
    s2 = np.float32(0.5) / np.float32(2688)
    deq = dequant_nvfp4(packed, np.array([[0x6D]], dtype=np.uint8), s2)[0]
    expect = [0.0096726, -0.0386905, 0.0773810, -0.1160714, 0, 0.0290179, -0.0580357, 0.1160714,
              -0.0, 0.0580357, -0.0773810, 0.0290179, 0.1160714, -0.0096726, 0.0580357, -0.0773810]
    np.testing.assert_allclose(deq, expect, rtol=1e-5, atol=1e-7)
    assert np.signbit(deq[8])  # nibble 8 is -0


def test_fp8_block_scales_cover_partial_edge_blocks():
    rng = np.random.default_rng(0)
    n, k = 200, 300  # 2 x 3 blocks, the last row/column blocks partial
    q = rng.integers(0, 0x7E, size=(n, k), dtype=np.uint8)
    scale = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    w = dequant_fp8_block(q, scale)
    assert w.shape == (n, k)
    np.testing.assert_array_equal(w[150, 250], E4M3_LUT[q[150, 250]] * 5)
    np.testing.assert_array_equal(w[199, 299], E4M3_LUT[q[199, 299]] * 6)
    np.testing.assert_array_equal(w[127, 128], E4M3_LUT[q[127, 128]] * 2)
    np.testing.assert_array_equal(w[128, 127], E4M3_LUT[q[128, 127]] * 4)


def test_gptq_int4_unpack_order_and_zero_offset():
    k, n, group = 256, 16, 128
    rng = np.random.default_rng(1)
    q = rng.integers(0, 16, size=(k, n)).astype(np.uint32)
    qweight = np.zeros((k // 8, n), dtype=np.uint32)
    for i in range(8):
        qweight |= q[i::8] << (4 * i)       # row 8j+i -> field i of word j
    qzeros = np.full((k // group, n // 8), 0x77777777, dtype=np.uint32)  # stored zero - 1 = 7
    scales = rng.random((k // group, n)).astype(np.float32)
    w = dequant_gptq_int4(qweight.view(np.int32), qzeros.view(np.int32), scales, group)
    assert w.shape == (n, k)
    expect = (q.astype(np.float32) - 8) * np.repeat(scales, group, axis=0)
    np.testing.assert_array_equal(w, expect.T)
