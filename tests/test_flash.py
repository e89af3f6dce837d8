"""attnlib.tiled_attention (online softmax over key tiles) against attnlib's and torch's SDPA."""
import pytest
import torch
import torch.nn.functional as F

import attnlib
from attnlib.flash import tiled_attention


def _qkv(B=2, H=3, Tq=37, Tk=37, D=16, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, H, Tq, D, generator=g, dtype=dtype),
            torch.randn(B, H, Tk, D, generator=g, dtype=dtype) * 3,   # large scores: rescaling matters
            torch.randn(B, H, Tk, D, generator=g, dtype=dtype))


@pytest.mark.parametrize("tile", [1, 5, 16, 37, 100])
def test_equals_torch_sdpa_for_any_tile(tile):
    q, k, v = _qkv()
    torch.testing.assert_close(tiled_attention(q, k, v, tile=tile), F.scaled_dot_product_attention(q, k, v))


def test_causal_and_masks_equal_attnlib():
    q, k, v = _qkv(Tq=9, Tk=23)
    mask = attnlib.causal_mask(9, 23)
    ref, _ = attnlib.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(tiled_attention(q, k, v, mask, tile=4), ref)
    q, k, v = _qkv(Tq=20, Tk=20)
    torch.testing.assert_close(tiled_attention(q, k, v, is_causal=True, tile=6),
                               F.scaled_dot_product_attention(q, k, v, is_causal=True))
    bias = torch.randn(1, 3, 20, 20, generator=torch.Generator().manual_seed(1))  # float mask, broadcast over B
    torch.testing.assert_close(tiled_attention(q, k, v, bias, tile=7),
                               F.scaled_dot_product_attention(q, k, v, attn_mask=bias))
    torch.testing.assert_close(tiled_attention(q, k, v, scale=0.5, tile=3),
                               F.scaled_dot_product_attention(q, k, v, scale=0.5))


def test_padding_mask_broadcast_and_fully_masked_rows():
    q, k, v = _qkv(Tq=6, Tk=10)
    pad = torch.ones(2, 1, 1, 10, dtype=torch.bool)
    pad[1, ..., 7:] = False                                   # (B, 1, 1, Tk): broadcast over rows
    ref, _ = attnlib.scaled_dot_product_attention(q, k, v, attn_mask=pad)
    torch.testing.assert_close(tiled_attention(q, k, v, pad, tile=3), ref)
    dead = torch.ones(6, 10, dtype=torch.bool)
    dead[2] = False                                           # row 2 sees nothing
    out = tiled_attention(q, k, v, dead, tile=4)
    assert not out.isnan().any() and (out[..., 2, :] == 0).all()
    ninf = torch.zeros(6, 10).masked_fill(~dead, float("-inf"))
    torch.testing.assert_close(tiled_attention(q, k, v, ninf, tile=4), out)


def test_bfloat16_inputs_keep_dtype():
    q, k, v = _qkv(dtype=torch.bfloat16)
    out = tiled_attention(q, k, v, tile=8)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), F.scaled_dot_product_attention(q.float(), k.float(), v.float()),
                               atol=2e-2, rtol=2e-2)


def test_errors_name_the_problem():
    q, k, v = _qkv(Tq=4, Tk=6)
    with pytest.raises(ValueError, match="tile"):
        tiled_attention(q, k, v, tile=0)
    with pytest.raises(ValueError, match="Tq=4, Tk=6"):
        tiled_attention(q, k, v, is_causal=True)
    with pytest.raises(ValueError, match="broadcast"):
        tiled_attention(q, k, v, torch.ones(5, 6, dtype=torch.bool))
    with pytest.raises(ValueError, match="d_k"):
        tiled_attention(q, k[..., :8], v)
