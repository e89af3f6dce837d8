"""Mask conversions: every convention round-trips, and each one gives the same attention."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import attnlib
from attnlib.masks import (
    from_additive,
    from_hf_attention_mask,
    from_key_padding,
    from_nn_mha,
    to_additive,
    to_hf_attention_mask,
    to_key_padding,
    to_nn_mha,
)

PAD = 0


def _batch():
    ids = torch.tensor([[5, 6, PAD], [7, 8, 9]])  # "Birds fly <PAD>" / "The cat slept"
    return ids, attnlib.padding_mask(ids, PAD)  # (2, 1, 1, 3)


def test_to_additive_values_and_same_attention():
    mask = attnlib.causal_mask(4)
    add = to_additive(mask)
    assert add.dtype == torch.float32
    assert torch.equal(add == 0, mask) and torch.isneginf(add[~mask]).all()
    q, k, v = torch.randn(3, 2, 4, 8).unbind(0)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(F.scaled_dot_product_attention(q, k, v, attn_mask=add), ref)
    assert torch.equal(from_additive(add), mask)
    assert to_additive(mask, torch.bfloat16, fill=-1e4).dtype == torch.bfloat16
    assert to_additive(mask, fill=-1e9)[0, 1].item() == -1e9


def test_key_padding_round_trip_and_polarity():
    _, mask = _batch()
    kpm = to_key_padding(mask)
    assert torch.equal(kpm, torch.tensor([[False, False, True], [False, False, False]]))  # True = pad
    assert torch.equal(from_key_padding(kpm), mask)


def test_hf_attention_mask_round_trip():
    ids, mask = _batch()
    hf = torch.tensor([[1, 1, 0], [1, 1, 1]])
    assert torch.equal(from_hf_attention_mask(hf), mask)
    assert torch.equal(to_hf_attention_mask(mask), hf)
    assert torch.equal(from_hf_attention_mask(hf.bool()), mask)


def test_nn_mha_2d_and_4d_round_trip():
    causal = attnlib.causal_mask(3)
    assert torch.equal(to_nn_mha(causal), ~causal)  # True = blocked there
    assert torch.equal(from_nn_mha(to_nn_mha(causal)), causal)
    _, pad = _batch()
    combined = pad & causal  # (2, 1, 3, 3)
    stacked = to_nn_mha(combined, n_heads=4)
    assert stacked.shape == (8, 3, 3)
    assert torch.equal(stacked[4 * 1 + 2], ~combined[1, 0])  # batch-major, heads inner
    assert torch.equal(from_nn_mha(stacked, n_heads=4), combined.expand(2, 4, 3, 3))
    add = to_additive(combined)
    assert torch.equal(from_nn_mha(to_nn_mha(add, n_heads=4), n_heads=4), add.expand(2, 4, 3, 3))


@pytest.mark.parametrize("as_float", [False, True])
def test_nn_multihead_attention_matches_under_converted_mask(as_float):
    torch.manual_seed(0)
    d_model, heads = 8, 2
    ours = attnlib.MultiHeadAttention(d_model, heads).eval()
    ref = attnlib.mha_to_torch(ours)
    _, pad = _batch()
    mask = pad & attnlib.causal_mask(3)  # no row fully masked (key 0 is always real)
    if as_float:
        mask = to_additive(mask)
    x = torch.randn(2, 3, d_model)
    out, w = ours(x, attn_mask=mask, need_weights=True)
    out_ref, w_ref = ref(x, x, x, attn_mask=to_nn_mha(mask, heads), need_weights=True, average_attn_weights=False)
    torch.testing.assert_close(out, out_ref)
    torch.testing.assert_close(w, w_ref)
    # the unconverted mask (wrong polarity) gives a different answer: the conversion matters
    if not as_float:
        wrong, _ = ref(x, x, x, attn_mask=mask.expand(2, heads, 3, 3).reshape(2 * heads, 3, 3))
        assert not torch.allclose(torch.nan_to_num(wrong), out)
    # key_padding_mask route for the padding part
    out_kpm, _ = ref(x, x, x, key_padding_mask=to_key_padding(pad), attn_mask=~attnlib.causal_mask(3))
    torch.testing.assert_close(out_kpm, ours(x, attn_mask=pad & attnlib.causal_mask(3))[0])


def test_errors_name_the_problem():
    with pytest.raises(TypeError, match="bool"):
        to_key_padding(torch.ones(2, 1, 1, 3))
    with pytest.raises(ValueError, match=r"\(2, 3\)"):
        to_key_padding(torch.ones(2, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="n_heads"):
        to_nn_mha(torch.ones(2, 1, 3, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="n_heads=3"):
        to_nn_mha(torch.ones(2, 2, 3, 3, dtype=torch.bool), n_heads=3)
    with pytest.raises(ValueError, match="first dim 8"):
        from_nn_mha(torch.ones(8, 3, 3, dtype=torch.bool), n_heads=3)
    with pytest.raises(ValueError, match="only 0"):
        from_hf_attention_mask(torch.tensor([[1, 2]]))
    with pytest.raises(TypeError, match="integers"):
        from_hf_attention_mask(torch.tensor([[1.0, 0.0]]))
    with pytest.raises(TypeError, match="floating"):
        from_additive(torch.ones(2, 2, dtype=torch.bool))
    with pytest.raises(TypeError, match="floating dtype"):
        to_additive(torch.ones(2, 2, dtype=torch.bool), torch.int64)
