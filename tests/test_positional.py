"""Positions: the sinusoidal formula, learned lookups, and RoPE's relative-position property."""
from __future__ import annotations

import math

import pytest
import torch

import attnlib
from attnlib.positional import (LearnedPositionalEmbedding, RotaryEmbedding,
                                SinusoidalPositionalEncoding, sinusoidal_table)


def test_sinusoidal_table_matches_formula_elementwise():
    T, C = 12, 10
    table = sinusoidal_table(T, C)
    assert table.shape == (T, C) and table.dtype == torch.float32
    for pos in range(T):
        for i in range(C // 2):
            angle = pos / 10000 ** (2 * i / C)
            assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-5)
            assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-5)


def test_sinusoidal_table_odd_width_and_errors():
    t = sinusoidal_table(5, 7)
    assert t.shape == (5, 7)
    torch.testing.assert_close(t[:, 5], torch.cos(torch.arange(5.0) / 10000 ** (4 / 7)))
    # The 7th column is sin at frequency 10000^(-6/7).
    torch.testing.assert_close(t[:, 6], torch.sin(torch.arange(5.0) / 10000 ** (6 / 7)))
    with pytest.raises(ValueError, match="max_len=0"):
        sinusoidal_table(0, 4)


def test_sinusoidal_module_is_buffer_and_lookup():
    pe = SinusoidalPositionalEncoding(16, 8)
    assert "pe" not in pe.state_dict() and not list(pe.parameters())
    pos = torch.tensor([3, 0, 15])
    torch.testing.assert_close(pe(pos), sinusoidal_table(16, 8)[pos])
    with pytest.raises(ValueError, match="position 16 .*max_len=16"):
        pe(torch.tensor([16]))
    with pytest.raises(TypeError, match="float32"):
        pe(torch.tensor([1.0]))


def test_learned_positional_embedding_lookup_and_range():
    emb = LearnedPositionalEmbedding(6, 4)
    pos = torch.arange(6)
    torch.testing.assert_close(emb(pos), emb.weight)
    assert emb.weight.requires_grad
    with pytest.raises(ValueError, match="position 6 .*max_len=6"):
        emb(torch.tensor([0, 6]))


def _rope_reference(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Written independently: pair (x[i], x[i + D/2]) as a complex number, multiply by e^{i m theta_i}."""
    D = x.shape[-1]
    theta = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)  # (D/2,)
    angle = positions.double()[:, None] * theta[None, :]  # (T, D/2)
    z = torch.complex(x[..., : D // 2].double(), x[..., D // 2:].double()) * torch.polar(torch.ones_like(angle), angle)
    return torch.cat((z.real, z.imag), dim=-1).to(x.dtype)


def test_rope_matches_complex_rotation_reference():
    torch.manual_seed(0)
    rope = RotaryEmbedding(8)
    x = torch.randn(2, 3, 5, 8)
    pos = torch.tensor([0, 1, 7, 2, 40])
    torch.testing.assert_close(rope(x, pos), _rope_reference(x, pos), atol=1e-5, rtol=1e-5)
    # position 0 is the identity; rotation preserves norms
    torch.testing.assert_close(rope(x, torch.zeros(5, dtype=torch.long)), x)
    torch.testing.assert_close(rope(x, pos).norm(dim=-1), x.norm(dim=-1))


def test_rope_matches_hf_llama_convention():
    """Against Hugging Face's own rotate-half implementation (transformers is installed)."""
    llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    torch.manual_seed(0)
    D = 16
    q, k = torch.randn(1, 2, 6, D), torch.randn(1, 2, 6, D)
    pos = torch.arange(6)
    theta = 10000.0 ** (-torch.arange(0, D, 2).float() / D)
    emb = torch.cat([pos[:, None].float() * theta] * 2, dim=-1)  # (T, D)
    q_hf, k_hf = llama.apply_rotary_pos_emb(q, k, emb.cos()[None], emb.sin()[None])
    rope = RotaryEmbedding(D)
    torch.testing.assert_close(rope(q, pos), q_hf)
    torch.testing.assert_close(rope(k, pos), k_hf)


def test_rope_scores_depend_only_on_relative_position():
    torch.manual_seed(0)
    rope = RotaryEmbedding(16)
    q, k = torch.randn(16), torch.randn(16)

    def score(m: int, n: int) -> float:
        qm = rope(q[None], torch.tensor([m]))[0]
        kn = rope(k[None], torch.tensor([n]))[0]
        return float(qm @ kn)

    for offset in (0, 3, -5):
        ref = score(10 + offset, 10)
        for m in (0 - min(offset, 0), 7, 50):
            assert score(m + offset, m) == pytest.approx(ref, abs=1e-4)
    # ... and it does depend on the offset (otherwise the test above proves nothing)
    assert abs(score(3, 0) - score(0, 0)) > 1e-3


def test_rope_holds_no_table_that_could_go_stale():
    """The angles are computed from the positions at every call, in float32: nothing is kept
    that a dtype round trip could round or a device move could leave behind."""
    rope = RotaryEmbedding(4)
    x = torch.randn(3, 4)
    before = rope(x, torch.tensor([200, 201, 202]))
    torch.testing.assert_close(before, _rope_reference(x, torch.tensor([200, 201, 202])), atol=1e-5, rtol=1e-5)
    assert list(rope.state_dict()) == [] and list(rope.buffers()) == []
    rope.half().float()
    assert torch.equal(rope(x, torch.tensor([200, 201, 202])), before)
    cos, sin = rope.cos_sin(torch.arange(3), torch.bfloat16)
    assert cos.dtype == sin.dtype == torch.bfloat16 and cos.shape == (3, 4)
    assert rope(x.bfloat16(), torch.arange(3)).dtype == torch.bfloat16


def test_rope_errors():
    with pytest.raises(ValueError, match="even.*got 7"):
        RotaryEmbedding(7)
    rope = RotaryEmbedding(8)
    with pytest.raises(ValueError, match="head_dim=8.*\\(2, 6\\)"):
        rope(torch.randn(2, 6), torch.arange(2))
    with pytest.raises(ValueError, match="length 3 .*T=4"):
        rope(torch.randn(4, 8), torch.arange(3))
    with pytest.raises(TypeError, match="integer"):
        rope(torch.randn(4, 8), torch.arange(4.0))


def test_exported_from_package():
    assert attnlib.RotaryEmbedding is RotaryEmbedding
    assert attnlib.sinusoidal_table is sinusoidal_table


def test_rope_refuses_integer_input_instead_of_rounding_it():
    """The cos/sin tables used to be cast to x's dtype: an int tensor came back as ints."""
    rope = RotaryEmbedding(4)
    with pytest.raises(TypeError, match=r"x must be a floating-point tensor.*torch.int64"):
        rope(torch.ones(3, 4, dtype=torch.long), torch.arange(3))
