"""attnlib.quant against llama.cpp's own Q4_1 code (the gguf package) and the schemes' definitions."""
import numpy as np
import pytest
import torch
from torch import nn

from attnlib import quant


def _w(shape=(48, 128), seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * 0.05


def test_rows_int8_half_a_step_and_4x():
    w = _w()
    q, s = quant.quantize_rows(w)
    assert q.dtype == torch.int8 and q.abs().max() == 127 and s.shape == (48, 1)
    err = (quant.dequantize_rows(q, s) - w).abs()
    assert (err <= s / 2 + 1e-8).all()
    # by hand, row 3
    s3 = w[3].abs().max() / 127
    torch.testing.assert_close(q[3].float(), torch.round(w[3] / s3))
    q4, s4 = quant.quantize_rows(w, bits=4)
    assert q4.abs().max() == 7
    assert (quant.dequantize_rows(q4, s4) - w).abs().mean() > 5 * err.mean()
    zero_q, _ = quant.quantize_rows(torch.zeros(2, 8))
    assert (zero_q == 0).all()


def test_groupwise_bounds_and_blocks():
    w = _w()
    q, d, m = quant.quantize_groupwise(w, bits=4, block=32)
    assert q.shape == (48, 4, 32) and d.shape == m.shape == (48, 4, 1) and int(q.max()) <= 15
    w_hat = quant.dequantize_groupwise(q, d, m)
    assert w_hat.shape == w.shape
    assert ((w_hat - w).abs().reshape(48, 4, 32) <= d / 2 + 1e-7).all()   # at most half a step
    torch.testing.assert_close(m[..., 0], w.reshape(48, 4, 32).amin(-1))   # the block minimum
    # smaller blocks, smaller error; more bits, smaller error
    e = lambda bits, block: (quant.round_trip(w, "groupwise", bits=bits, block=block) - w).pow(2).mean()
    assert e(4, 16) < e(4, 32) < e(4, 128) and e(8, 32) < e(4, 32) < e(2, 32)


def test_q4_1_bytes_equal_llama_cpp():
    gguf = pytest.importorskip("gguf")
    from gguf.quants import dequantize, quantize
    w = _w((16, 96), seed=1)
    w[0, :32] = 0.25                                       # a constant block (d = 0)
    ref = quantize(w.numpy(), gguf.GGMLQuantizationType.Q4_1)              # (16, 60) uint8
    ours = quant.pack_q4_1(*quant.quantize_groupwise(w, 4, 32, half_params=True))
    assert ours.shape == (48, 20)
    np.testing.assert_array_equal(ours.reshape(16, 60).numpy(), ref)
    back = dequantize(ref, gguf.GGMLQuantizationType.Q4_1)                 # (16, 96) float32
    blocks = torch.from_numpy(np.ascontiguousarray(ref)).reshape(-1, 20)
    ours_back = quant.dequantize_groupwise(*quant.unpack_q4_1(blocks)).reshape(16, 96)
    np.testing.assert_array_equal(ours_back.numpy(), back)
    np.testing.assert_array_equal(quant.round_trip(w, "q4_1").numpy(), back)
    assert quant.bits_per_weight("q4_1") == 5.0


def test_nf4_levels_are_normal_quantiles():
    # QLoRA's construction (bitsandbytes create_normal_map): 8 positive and 7 negative quantiles of
    # N(0, 1) between the offset 0.9677083 and 0.5, an exact zero, scaled to [-1, 1]
    n = torch.distributions.Normal(torch.tensor(0.0, dtype=torch.float64), torch.tensor(1.0, dtype=torch.float64))
    pos = n.icdf(torch.linspace(0.9677083, 0.5, 9, dtype=torch.float64)[:-1])
    neg = -n.icdf(torch.linspace(0.9677083, 0.5, 8, dtype=torch.float64)[:-1])
    ref = torch.cat([pos, neg, torch.zeros(1, dtype=torch.float64)]).sort().values
    torch.testing.assert_close(torch.tensor(quant.NF4_LEVELS, dtype=torch.float64), ref / ref.max(),
                               atol=1e-6, rtol=0)


def test_nf4_levels_and_nearest():
    assert len(quant.NF4_LEVELS) == 16 and quant.NF4_LEVELS[7] == 0.0
    levels = torch.tensor(quant.NF4_LEVELS)
    assert (levels.diff() > 0).all()
    w = _w((8, 128))
    codes, absmax = quant.quantize_nf4(w, block=64)
    w_hat = quant.dequantize_nf4(codes, absmax)
    x = (w.reshape(8, 2, 64) / absmax)                     # normalised to [-1, 1]
    best = (x[..., None] - levels).abs().amin(-1)          # distance to the nearest level
    got = (w_hat.reshape(8, 2, 64) / absmax - x).abs()
    torch.testing.assert_close(got, best)
    on_grid = levels.repeat(4)[None] * 0.3                 # values on the grid come back exactly
    torch.testing.assert_close(quant.round_trip(on_grid, "nf4"), on_grid)


def test_quantize_linears_copies_and_bits():
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 64))
    q = quant.quantize_linears(model, lambda w: quant.round_trip(w, "int8"), where=lambda n: n == "0")
    assert not torch.equal(q[0].weight, model[0].weight)
    assert torch.equal(q[2].weight, model[2].weight)       # not picked
    torch.testing.assert_close(q[0].weight, quant.round_trip(model[0].weight.detach(), "int8"))
    assert quant.bits_per_weight("groupwise", bits=4, block=32) == 5.0
    assert quant.bits_per_weight("int8", row_len=64) == 8.25
    assert quant.bits_per_weight("nf4", block=64) == 4.25


def test_errors():
    with pytest.raises(ValueError, match="block"):
        quant.quantize_groupwise(_w((4, 30)), 4, 32)
    with pytest.raises(ValueError, match="bits"):
        quant.quantize_rows(_w(), bits=9)
    with pytest.raises(TypeError, match="floating"):
        quant.quantize_rows(torch.ones(3, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="scheme"):
        quant.round_trip(_w(), "int3")
    with pytest.raises(ValueError, match="20"):
        quant.unpack_q4_1(torch.zeros(3, 18, dtype=torch.uint8))
