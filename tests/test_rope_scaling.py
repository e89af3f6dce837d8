"""RoPE scaling (attnlib.rope_scaling): position interpolation and NTK-aware base scaling."""
from __future__ import annotations

import pytest
import torch

import attnlib
from attnlib.rope_scaling import ScaledRotaryEmbedding, ntk_base, scaled_rope


def test_pi_rotates_position_m_as_m_over_factor():
    plain = attnlib.RotaryEmbedding(8)
    pi = ScaledRotaryEmbedding(8, method="pi", factor=4)
    cos, sin = pi.cos_sin(torch.arange(0, 64, 4))          # positions 0, 4, ..., 60
    want_cos, want_sin = plain.cos_sin(torch.arange(16))  # 0, 1, ..., 15
    torch.testing.assert_close(cos, want_cos)
    torch.testing.assert_close(sin, want_sin)


def test_ntk_slows_the_slowest_pair_by_the_factor_and_keeps_the_fastest():
    d, s = 16, 4.0
    plain, ntk = attnlib.RotaryEmbedding(d), ScaledRotaryEmbedding(d, method="ntk", factor=s)
    assert ntk.base == pytest.approx(10000.0 * s ** (d / (d - 2)))
    assert ntk.base == pytest.approx(ntk_base(10000.0, s, d))
    ratio = plain.inv_freq().double() / ntk.inv_freq().double()
    assert ratio[0].item() == pytest.approx(1.0)
    assert ratio[-1].item() == pytest.approx(s, rel=1e-5)
    assert bool((ratio[1:] > ratio[:-1]).all())  # stretched more, the slower the pair


def test_factor_one_and_none_change_nothing():
    pos = torch.arange(50)
    want = attnlib.RotaryEmbedding(8, base=500.0).cos_sin(pos)
    for method, factor in (("pi", 1), ("ntk", 1), ("none", 3)):
        got = ScaledRotaryEmbedding(8, 500.0, method=method, factor=factor).cos_sin(pos)
        torch.testing.assert_close(got, want)


def test_scaled_rope_swaps_the_angles_and_restores_them():
    torch.manual_seed(0)
    gpt = attnlib.GPT(attnlib.TransformerConfig(vocab_size=11, d_model=16, n_heads=2,
                                                n_layers=1, max_len=64, positional="rope")).eval()
    with torch.no_grad():  # larger weights than at initialisation: scores that depend on angles
        for p in gpt.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.3)
    ids = torch.randint(0, 11, (1, 40))
    with torch.no_grad():
        before = gpt(ids).logits
        with scaled_rope(gpt, "pi", 2) as same:
            assert same is gpt and isinstance(gpt.rope, ScaledRotaryEmbedding)
            scaled = gpt(ids).logits
        after = gpt(ids).logits
    assert type(gpt.rope) is attnlib.RotaryEmbedding
    torch.testing.assert_close(before, after)
    assert (before - scaled).abs().max() > 1e-2
    torch.testing.assert_close(before[:, :1], scaled[:, :1])  # position 0 is not rotated


def test_bad_arguments():
    with pytest.raises(ValueError, match="method"):
        ScaledRotaryEmbedding(8, method="yarn", factor=2)
    with pytest.raises(ValueError, match="factor"):
        ScaledRotaryEmbedding(8, method="pi", factor=0.5)
    gpt = attnlib.GPT(attnlib.TransformerConfig(vocab_size=11, d_model=16, n_heads=2,
                                                n_layers=1))
    with pytest.raises(ValueError, match="positional='rope'"):
        with scaled_rope(gpt, "pi", 2):
            pass
