"""Blocks against torch.nn's own Transformer layers (weights copied), and FFN / embedding checks."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import attnlib
from attnlib.layers import DecoderLayer, Embeddings, EncoderLayer, FeedForward

C, H, FF = 16, 4, 24


def copy_mha(ours: attnlib.MultiHeadAttention, theirs: nn.MultiheadAttention) -> None:
    """torch packs W_Q, W_K, W_V into one (3C, C) in_proj_weight; attnlib.mha_from_torch unpacks it."""
    ours.load_state_dict(attnlib.mha_from_torch(theirs).state_dict())


def copy_common(ours: nn.Module, theirs: nn.Module, norms: dict[str, str]) -> None:
    copy_mha(ours.self_attn, theirs.self_attn)
    with torch.no_grad():
        ours.ffn.fc1.load_state_dict(theirs.linear1.state_dict())
        ours.ffn.fc2.load_state_dict(theirs.linear2.state_dict())
        for mine, torch_name in norms.items():
            # randomise the norms so a swapped norm1/norm2 could not go unnoticed
            ref = getattr(theirs, torch_name)
            ref.weight.normal_(1.0, 0.3)
            ref.bias.normal_(0.0, 0.3)
            getattr(ours, mine).load_state_dict(ref.state_dict())


@pytest.mark.parametrize("norm_first", [True, False])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_layer_matches_torch(norm_first, activation):
    torch.manual_seed(0)
    ref = nn.TransformerEncoderLayer(C, H, FF, dropout=0.0, activation=activation, batch_first=True,
                                     norm_first=norm_first).eval()
    ours = EncoderLayer(C, H, FF, activation=activation, norm_first=norm_first).eval()
    copy_common(ours, ref, {"norm1": "norm1", "norm2": "norm2"})
    x = torch.randn(2, 5, C)
    out, w = ours(x)
    assert w is None
    torch.testing.assert_close(out, ref(x), atol=1e-5, rtol=1e-5)
    # with padding: torch's key_padding_mask is True = PAD (blocked); ours is True = may attend
    pad = torch.tensor([[False] * 5, [False, False, False, True, True]])
    out, w = ours(x, attn_mask=~pad[:, None, None, :], need_weights=True)
    expected = ref(x, src_key_padding_mask=pad)
    torch.testing.assert_close(out[0], expected[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out[1, :3], expected[1, :3], atol=1e-5, rtol=1e-5)
    assert w.shape == (2, H, 5, 5)
    assert torch.all(w[1, :, :, 3:] == 0)


@pytest.mark.parametrize("norm_first", [True, False])
def test_decoder_layer_matches_torch(norm_first):
    torch.manual_seed(1)
    ref = nn.TransformerDecoderLayer(C, H, FF, dropout=0.0, batch_first=True, norm_first=norm_first).eval()
    ours = DecoderLayer(C, H, FF, cross_attention=True, activation="relu", norm_first=norm_first).eval()
    copy_common(ours, ref, {"norm1": "norm1", "norm2": "norm2", "norm3": "norm3"})
    copy_mha(ours.cross_attn, ref.multihead_attn)
    x, memory = torch.randn(2, 4, C), torch.randn(2, 6, C)
    tgt_mask = nn.Transformer.generate_square_subsequent_mask(4)  # float, -inf above the diagonal
    src_pad = torch.tensor([[False] * 6, [False] * 4 + [True] * 2])  # torch: True = pad
    expected = ref(x, memory, tgt_mask=tgt_mask, tgt_is_causal=True, memory_key_padding_mask=src_pad)
    out, self_w, cross_w = ours(x, memory, memory_mask=~src_pad[:, None, None, :], need_weights=True)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    assert self_w.shape == (2, H, 4, 4) and cross_w.shape == (2, H, 4, 6)
    assert torch.all(self_w.triu(1) == 0)  # causal: nothing above the diagonal
    assert torch.all(cross_w[1, ..., 4:] == 0)
    torch.testing.assert_close(cross_w.sum(-1), torch.ones(2, H, 4))


def test_gpt_block_has_no_cross_attention_and_is_causal():
    torch.manual_seed(0)
    blk = DecoderLayer(C, H, FF).eval()
    assert blk.cross_attn is None and blk.norm2 is None
    x = torch.randn(1, 6, C)
    y, _, _ = blk(x)
    x2 = x.clone()
    x2[:, 4:] = torch.randn(1, 2, C)  # change the future
    y2, _, _ = blk(x2)
    torch.testing.assert_close(y2[:, :4], y[:, :4])
    assert not torch.allclose(y2[:, 4:], y[:, 4:])
    with pytest.raises(ValueError, match="memory must be given exactly"):
        blk(x, torch.randn(1, 3, C))
    with pytest.raises(ValueError, match="memory must be given exactly"):
        DecoderLayer(C, H, FF, cross_attention=True)(x)


def test_norm_first_changes_the_computation():
    """Pre-norm and post-norm with the same weights give different outputs (the flag is wired)."""
    torch.manual_seed(0)
    pre = EncoderLayer(C, H, FF, norm_first=True).eval()
    post = EncoderLayer(C, H, FF, norm_first=False).eval()
    post.load_state_dict(pre.state_dict())
    x = torch.randn(1, 3, C)
    assert not torch.allclose(pre(x)[0], post(x)[0])
    # post-norm output is normalised (mean 0, var 1 per token); pre-norm's is not
    y = post(x)[0]
    torch.testing.assert_close(y.mean(-1), torch.zeros(1, 3), atol=1e-5, rtol=0)


@pytest.mark.parametrize("activation", ["relu", "gelu", "gelu_tanh", "swiglu"])
def test_feed_forward_formulas(activation):
    torch.manual_seed(0)
    ffn = FeedForward(C, FF, activation)
    x = torch.randn(3, C)
    h = x @ ffn.fc1.weight.T + ffn.fc1.bias
    if activation == "relu":
        h = h.clamp_min(0)
    elif activation == "gelu":
        h = 0.5 * h * (1 + torch.erf(h / 2 ** 0.5))
    elif activation == "gelu_tanh":
        h = 0.5 * h * (1 + torch.tanh((2 / torch.pi) ** 0.5 * (h + 0.044715 * h ** 3)))
    else:
        g = x @ ffn.gate.weight.T + ffn.gate.bias
        h = g * torch.sigmoid(g) * h
    expected = h @ ffn.fc2.weight.T + ffn.fc2.bias
    torch.testing.assert_close(ffn(x), expected, atol=1e-5, rtol=1e-5)
    n_params = sum(p.numel() for p in ffn.parameters() if p.dim() == 2)
    assert n_params == (3 if activation == "swiglu" else 2) * C * FF
    with pytest.raises(ValueError, match="unknown activation 'tanh'"):
        FeedForward(C, FF, "tanh")


def test_ffn_is_position_wise():
    torch.manual_seed(0)
    ffn = FeedForward(C, FF)
    x = torch.randn(2, 5, C)
    torch.testing.assert_close(ffn(x)[:, 2], ffn(x[:, 2]))


def test_embeddings_sum_types_and_norm():
    torch.manual_seed(0)
    cfg = attnlib.TransformerConfig(vocab_size=11, d_model=C, n_heads=H, n_layers=1, max_len=8,
                                    type_vocab_size=2, embedding_norm=True)
    emb = Embeddings(cfg)
    with torch.no_grad():
        emb.norm.weight.normal_()
    ids, types, pos = torch.tensor([[1, 2, 3]]), torch.tensor([[0, 1, 1]]), torch.arange(3)
    raw = emb.tok_emb.weight[ids] + emb.pos_emb.weight[pos] + emb.type_emb.weight[types]
    torch.testing.assert_close(emb(ids, pos, types), F.layer_norm(raw, (C,), emb.norm.weight, emb.norm.bias, 1e-5))
    # sinusoidal: the fixed table; rope / none: no additive positions
    sin = Embeddings(attnlib.TransformerConfig(vocab_size=11, d_model=C, n_heads=H, n_layers=1, max_len=8,
                                               positional="sinusoidal"))
    torch.testing.assert_close(sin(ids, pos), sin.tok_emb.weight[ids] + attnlib.sinusoidal_table(8, C)[:3])
    for kind in ("rope", "none"):
        e = Embeddings(attnlib.TransformerConfig(vocab_size=11, d_model=C, n_heads=H, n_layers=1, positional=kind))
        assert e.pos_emb is None
        torch.testing.assert_close(e(ids, pos), e.tok_emb.weight[ids])


@pytest.mark.parametrize("cls", [EncoderLayer, DecoderLayer])
def test_layers_run_in_bfloat16(cls):
    torch.manual_seed(0)
    layer = cls(C, H, FF).to(torch.bfloat16)
    out = layer(torch.randn(2, 3, C, dtype=torch.bfloat16))[0]
    assert out.dtype == torch.bfloat16 and torch.isfinite(out.float()).all()


# ---------------------------------------------------------------------------------------------
# RMSNorm and the config's norm / rope_base switches
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("eps", [1e-6, 1e-5, 0.5])
def test_rmsnorm_matches_torch_rmsnorm(eps):
    torch.manual_seed(0)
    ours, ref = attnlib.RMSNorm(C, eps=eps), nn.RMSNorm(C, eps=eps)
    with torch.no_grad():
        ref.weight.normal_()
    ours.load_state_dict(ref.state_dict())  # the one parameter is named `weight` on both sides
    assert [n for n, _ in ours.named_parameters()] == ["weight"]
    x = 3.0 * torch.randn(2, 5, C) + 1.0  # a non-zero mean: RMSNorm must not subtract it
    torch.testing.assert_close(ours(x), ref(x), atol=1e-6, rtol=1e-5)
    # float32 takes torch.rms_norm: bit for bit the formula written out (the bf16 path below)
    with torch.no_grad():
        written = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * ours.weight
        assert torch.equal(ours(x), written)
    assert not torch.allclose(ours(x), F.layer_norm(x, (C,), ref.weight, None, eps), atol=1e-2)
    x16 = x.bfloat16()
    out16 = ours.to(torch.bfloat16)(x16)
    assert out16.dtype == torch.bfloat16
    torch.testing.assert_close(out16.float(), ref(x), atol=5e-2, rtol=2e-2)
    assert attnlib.RMSNorm(C).eps == 1e-6


def test_rmsnorm_errors():
    with pytest.raises(ValueError, match="dim"):
        attnlib.RMSNorm(0)
    with pytest.raises(ValueError, match=r"dim=16.*\(2, 5, 8\)"):
        attnlib.RMSNorm(C)(torch.randn(2, 5, 8))


def test_unknown_norm_name_lists_the_choices():
    with pytest.raises(ValueError, match=r"unknown norm 'batchnorm'.*'layernorm'.*'rmsnorm'"):
        attnlib.TransformerConfig(vocab_size=11, d_model=C, n_heads=H, n_layers=1, norm="batchnorm")
    with pytest.raises(ValueError, match="rope_base"):
        attnlib.TransformerConfig(vocab_size=11, d_model=C, n_heads=H, n_layers=1, rope_base=0.0)


def _norms(model: nn.Module) -> list[nn.Module]:
    return [m for m in model.modules() if isinstance(m, (nn.LayerNorm, nn.RMSNorm, attnlib.RMSNorm))]


@pytest.mark.parametrize("model_cls", [attnlib.GPT, attnlib.Encoder, attnlib.EncoderDecoder])
def test_rmsnorm_config_replaces_every_layernorm(model_cls):
    kw = dict(vocab_size=11, d_model=C, n_heads=H, n_layers=2, max_len=8, embedding_norm=True,
              layer_norm_eps=1e-6)
    ln = _norms(model_cls(attnlib.TransformerConfig(**kw)))
    rms = _norms(model_cls(attnlib.TransformerConfig(**kw, norm="rmsnorm")))
    assert len(rms) == len(ln) > 0 and all(isinstance(m, nn.LayerNorm) for m in ln)
    assert all(type(m) is attnlib.RMSNorm and m.eps == 1e-6 for m in rms)
    # the block is the Llama block: x + attn(rms(x)), then x + ffn(rms(x))
    torch.manual_seed(0)
    layer = DecoderLayer(C, H, FF, norm="rmsnorm", layer_norm_eps=1e-6, activation="swiglu").eval()
    x = torch.randn(2, 5, C)
    ref_norm = nn.RMSNorm(C, eps=1e-6)
    h = x + layer.self_attn(ref_norm(x), is_causal=True)[0]
    torch.testing.assert_close(layer(x)[0], h + layer.ffn(ref_norm(h)), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("model_cls", [attnlib.GPT, attnlib.Encoder, attnlib.EncoderDecoder])
def test_rope_base_and_n_kv_heads_reach_every_model(model_cls):
    cfg = attnlib.TransformerConfig(vocab_size=11, d_model=C, n_heads=H, n_layers=1, max_len=8,
                                    positional="rope", rope_base=5e5, n_kv_heads=2)
    model = model_cls(cfg)
    rope = model.encoder.rope if model_cls is attnlib.EncoderDecoder else model.rope
    assert rope.base == 5e5
    attns = [m for m in model.modules() if isinstance(m, attnlib.MultiHeadAttention)]
    assert attns and all(m.n_kv_heads == 2 and m.k_proj.out_features == 2 * (C // H) for m in attns)
    torch.testing.assert_close(rope.inv_freq(), 5e5 ** (-torch.arange(0, C // H, 2).float() / (C // H)))


def test_dropout_acts_in_training_only_at_every_site():
    """layers.dropped: each dropout site drops in training and is skipped (x itself) in eval."""
    from attnlib.layers import dropped
    x = torch.ones(4000)
    drop = nn.Dropout(0.5).train()
    y = dropped(drop, x)
    assert 0.45 < float((y == 0).float().mean()) < 0.55 and torch.allclose(y[y != 0], torch.tensor(2.0))
    assert dropped(drop.eval(), x) is x
    # every site of a GPT: in training, zeroing any one of them changes the output
    cfg = attnlib.TransformerConfig(vocab_size=16, d_model=8, n_heads=2, n_layers=1, max_len=8, dropout=0.5)
    torch.manual_seed(0)
    gpt = attnlib.GPT(cfg)
    ids = torch.randint(0, 16, (1, 6))
    sites = [m for m in gpt.modules() if isinstance(m, nn.Dropout)]
    assert len(sites) == 3  # embeddings, the layer's residual dropout, the FFN's
    for m in gpt.modules():
        if isinstance(m, attnlib.MultiHeadAttention):
            m.dropout = 0.0  # the attention weights' own dropout: off, so only the sites act
    gpt.eval()
    ref = gpt(ids).logits
    assert torch.equal(gpt(ids).logits, ref)  # eval: deterministic, no dropout anywhere
    gpt.train()
    for site in sites:
        others = [s for s in sites if s is not site]
        for s in others:
            s.p = 0.0
        site.p = 0.5
        torch.manual_seed(1)
        assert not torch.allclose(gpt(ids).logits, ref), "a dropout site did nothing in training"
        for s in sites:
            s.p = 0.5
