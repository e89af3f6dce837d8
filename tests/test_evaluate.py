"""attnlib.evaluate: loss_by_position against torch's own loss, head_output_norms, heads_off and
logit_lens against hand-written references."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attnlib


def small_gpt(positional="rope", max_len=16):
    torch.manual_seed(0)
    cfg = attnlib.TransformerConfig(vocab_size=11, d_model=16, n_heads=2, n_layers=1,
                                    max_len=max_len, positional=positional)
    return attnlib.GPT(cfg)


def test_loss_by_position_matches_cross_entropy_on_each_window():
    model = small_gpt().train()
    ids = torch.randint(0, 11, (50,), generator=torch.Generator().manual_seed(1))
    by_pos = attnlib.loss_by_position(model, ids, 8, batch_size=2)
    assert by_pos.shape == (8,) and by_pos.dtype == torch.float32
    assert model.training  # mode restored
    n = (50 - 1) // 8  # 6 windows sharing boundary tokens: starts 0, 8, ..., 40
    rows = []
    model.eval()
    with torch.no_grad():
        for w in range(n):
            x, y = ids[w * 8: w * 8 + 8], ids[w * 8 + 1: w * 8 + 9]
            logits = model(x[None]).logits[0]
            rows.append(F.cross_entropy(logits, y, reduction="none"))
            # the mean over positions is the model's own loss on that window
            torch.testing.assert_close(rows[-1].mean(), model(x[None], targets=y[None]).loss)
    torch.testing.assert_close(by_pos, torch.stack(rows).mean(0))
    # the batch size changes nothing but memory
    torch.testing.assert_close(attnlib.loss_by_position(model, ids, 8, batch_size=64), by_pos)


def test_loss_by_position_sees_position_specific_skill():
    """A model told nothing about the first token does worse at position 0 than later."""
    # periodic text: from position 1 on the next token is predictable from the previous one
    ids = torch.arange(0, 200) % 5
    model = small_gpt(max_len=8)
    attnlib.train(model, ids[:150], steps=60, block_size=8, lr=1e-2)
    by_pos = attnlib.loss_by_position(model, ids[150:], 8)
    assert by_pos.mean() < 0.5  # learned the cycle
    ones = torch.ones(8)
    assert not torch.allclose(by_pos, by_pos.mean() * ones)  # one number per position


def test_loss_by_position_errors_name_the_argument():
    model = small_gpt()
    with pytest.raises(ValueError, match=r"block_size \+ 1 = 9"):
        attnlib.loss_by_position(model, torch.arange(5), 8)
    with pytest.raises(ValueError, match="block_size"):
        attnlib.loss_by_position(model, torch.arange(20), 0)
    with pytest.raises(ValueError, match="1-D"):
        attnlib.loss_by_position(model, torch.zeros(2, 20, dtype=torch.long), 4)
    with pytest.raises(TypeError, match="float32"):
        attnlib.loss_by_position(model, torch.zeros(20), 4)
    with pytest.raises(ValueError, match="batch_size"):
        attnlib.loss_by_position(model, torch.arange(20) % 11, 4, batch_size=0)
    # a window longer than the model's context: the model's own error names max_len
    with pytest.raises(ValueError, match="max_len=16"):
        attnlib.loss_by_position(model, torch.arange(40) % 11, 32)


# ------------------------------------------------------------------- head_output_norms
@pytest.mark.parametrize("kv_heads", [None, 2, 1])
def test_head_output_norms_are_the_lengths_that_sum_to_the_output(kv_heads):
    """alpha_hij * (W_O,h v_hj), summed over heads and keys, plus the bias, is the layer's
    output; head_output_norms gives the length of each W_O,h v_hj (query head h reads value
    head h // (H / G) under grouped-query attention)."""
    torch.manual_seed(0)
    C, H = 16, 4
    attn = attnlib.MultiHeadAttention(C, H, n_kv_heads=kv_heads).eval()
    G, D = attn.n_kv_heads, C // H
    x = torch.randn(2, 5, C)
    norms = attnlib.head_output_norms(attn, x)
    assert norms.shape == (2, H, 5) and not norms.requires_grad
    with torch.no_grad():
        out, alpha = attn(x, need_weights=True)                   # alpha (B, H, T, T)
        v = attn.v_proj(x).view(2, 5, G, D)                        # (B, T, G, D)
        total = attn.out_proj.bias.expand(2, 5, C).clone()
        for h in range(H):
            v_h = v[:, :, h // (H // G)]                           # (B, T, D)
            written = v_h @ attn.out_proj.weight[:, h * D:(h + 1) * D].T   # (B, T, C)
            torch.testing.assert_close(norms[:, h], written.norm(dim=-1))
            total += alpha[:, h] @ written
    torch.testing.assert_close(total, out)


def test_head_output_norms_refuses_what_is_not_an_attention_layer():
    attn = attnlib.MultiHeadAttention(8, 2)
    with pytest.raises(TypeError, match="MultiHeadAttention"):
        attnlib.head_output_norms(torch.nn.Linear(8, 8), torch.randn(1, 3, 8))
    with pytest.raises(ValueError, match=r"x must have shape \(B, T, d_model=8\)"):
        attnlib.head_output_norms(attn, torch.randn(1, 3, 6))


# --------------------------------------------------------------------------- heads_off
def test_heads_off_equals_zeroing_the_heads_columns_of_w_o():
    """Switching head h of layer l off is zeroing its D columns of W_O (a copy, by hand); other
    heads and layers are untouched, and the model is back to normal after the block."""
    import copy

    model = small_gpt().eval()
    model.layers.append(copy.deepcopy(model.layers[0]))         # two layers, grouped queries off
    ids = torch.randint(0, 11, (2, 7), generator=torch.Generator().manual_seed(2))
    D = model.layers[0].self_attn.head_dim
    with torch.no_grad():
        before = model(ids).logits
        with attnlib.heads_off(model, [(1, 0), (0, 1)]) as same:
            assert same is model
            off = model(ids).logits
        by_hand = copy.deepcopy(model)
        by_hand.layers[1].self_attn.out_proj.weight[:, 0:D] = 0
        by_hand.layers[0].self_attn.out_proj.weight[:, D:2 * D] = 0
        torch.testing.assert_close(off, by_hand(ids).logits)
        assert (off - before).abs().max() > 1e-3                  # it did something
        torch.testing.assert_close(model(ids).logits, before, rtol=0, atol=0)   # hooks gone
        with attnlib.heads_off(model, []):
            torch.testing.assert_close(model(ids).logits, before, rtol=0, atol=0)


def test_heads_off_removes_its_hooks_after_an_error_and_refuses_bad_heads():
    model = small_gpt().eval()
    ids = torch.zeros(1, 3, dtype=torch.long)
    with torch.no_grad():
        before = model(ids).logits
        with pytest.raises(RuntimeError, match="inside"):
            with attnlib.heads_off(model, [(0, 0)]):
                raise RuntimeError("inside")
        torch.testing.assert_close(model(ids).logits, before, rtol=0, atol=0)
    with pytest.raises(ValueError, match=r"head \(1, 0\) is not in this model: layers 0..0"):
        with attnlib.heads_off(model, [(1, 0)]):
            pass
    with pytest.raises(ValueError, match=r"heads 0..1"):
        with attnlib.heads_off(model, [(0, 2)]):
            pass
    with pytest.raises(TypeError, match="pairs of ints"):
        with attnlib.heads_off(model, [(0, 0, 1)]):
            pass
    with pytest.raises(TypeError, match=r"\.layers"):
        with attnlib.heads_off(torch.nn.Linear(2, 2), [(0, 0)]):
            pass
    for bad in ([(0, True)], [(0.0, 1)], [0, 1], [(0, "1")]):
        with pytest.raises(TypeError, match="pairs of ints"):
            with attnlib.heads_off(model, bad):
                pass
    with pytest.raises(TypeError, match="list of"):
        with attnlib.heads_off(model, 3):
            pass


def test_heads_off_takes_numpy_ints():
    import numpy as np

    model = small_gpt().eval()
    ids = torch.zeros(1, 3, dtype=torch.long)
    with torch.no_grad():
        with attnlib.heads_off(model, [(0, 1)]):
            plain = model(ids).logits
        with attnlib.heads_off(model, [(np.int64(0), np.int32(1))]):
            torch.testing.assert_close(model(ids).logits, plain, rtol=0, atol=0)
        with attnlib.heads_off(model, iter([[0, 1]])):  # any iterable of pairs, lists too
            torch.testing.assert_close(model(ids).logits, plain, rtol=0, atol=0)


# --------------------------------------------------------------------------- logit_lens
def lens_by_hand(model, ids):
    """The lens written out: the embedding, then each layer called in turn, each stage through
    norm_f (pre-norm) and lm_head."""
    positions = torch.arange(ids.shape[1])
    rope = model.rope.cos_sin(positions, torch.float32) if model.rope is not None else None
    with torch.no_grad():
        x = model.embed(ids, positions)
        stages = [x]
        for layer in model.layers:
            x = layer(x, rope=rope)[0]
            stages.append(x)
        norm = model.norm_f if model.norm_f is not None else torch.nn.Identity()
        return torch.stack([model.lm_head(norm(s)) for s in stages])


@pytest.mark.parametrize("kw", [dict(positional="rope"), dict(positional="learned"),
                                dict(positional="learned", norm_first=False)])
def test_logit_lens_equals_the_layers_called_by_hand_and_ends_at_the_output(kw):
    torch.manual_seed(0)
    cfg = attnlib.TransformerConfig(vocab_size=11, d_model=16, n_heads=2, n_layers=3,
                                    max_len=16, **kw)
    model = attnlib.GPT(cfg).train()  # dropout 0 here; the lens runs in eval mode anyway
    ids = torch.randint(0, 11, (2, 7), generator=torch.Generator().manual_seed(1))
    lens = attnlib.logit_lens(model, ids)
    assert lens.shape == (4, 2, 7, 11) and not lens.requires_grad
    assert model.training  # mode restored
    model.eval()
    torch.testing.assert_close(lens, lens_by_hand(model, ids))
    with torch.no_grad():
        torch.testing.assert_close(lens[-1], model(ids).logits)  # the last row is the output
    # the last positions only: the same rows, cut
    torch.testing.assert_close(attnlib.logit_lens(model, ids, logits_to_keep=2), lens[:, :, -2:])
    torch.testing.assert_close(attnlib.logit_lens(model, ids, logits_to_keep=np.int64(99)), lens)


def test_logit_lens_sees_heads_switched_off_and_removes_its_hooks():
    model = small_gpt().eval()
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    with attnlib.heads_off(model, [(0, 1)]):
        off = attnlib.logit_lens(model, ids)
        with torch.no_grad():
            torch.testing.assert_close(off[-1], model(ids).logits)
    assert not torch.allclose(off[-1], attnlib.logit_lens(model, ids)[-1])
    modules = [model.embed, *model.layers]
    assert all(not m._forward_hooks for m in modules)
    with pytest.raises(ValueError, match="input_ids"):  # the model's own check, hooks gone after
        attnlib.logit_lens(model, torch.tensor([[1, 99]]))
    assert all(not m._forward_hooks for m in modules)
