"""GPT, Encoder and EncoderDecoder: the properties the book claims, each checked."""
from __future__ import annotations

import math

import pytest
import torch

from attnlib import GPT, Encoder, EncoderDecoder, KVCache, TransformerConfig

POSITIONALS = ["learned", "sinusoidal", "rope", "none"]
V = 37


def cfg_(**kw) -> TransformerConfig:
    base = dict(vocab_size=V, d_model=16, n_heads=4, n_layers=2, max_len=24)
    base.update(kw)
    return TransformerConfig(**base)


def randomise_norms(model: torch.nn.Module) -> None:
    """Fresh LayerNorms are 1/0; random ones make name mix-ups visible."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.LayerNorm):
                m.weight.normal_(1.0, 0.2)
                m.bias.normal_(0.0, 0.2)


# ------------------------------------------------------------------------------------------ GPT
def test_gpt_shapes_and_attention_rows():
    torch.manual_seed(0)
    gpt = GPT(cfg_()).eval()
    ids = torch.randint(0, V, (2, 7))
    out = gpt(ids, need_weights=True)
    assert out.logits.shape == (2, 7, V) and out.loss is None and out.hidden_states.shape == (2, 7, 16)
    assert len(out.attentions) == 2
    for w in out.attentions:
        assert w.shape == (2, 4, 7, 7)
        torch.testing.assert_close(w.sum(-1), torch.ones(2, 4, 7))
        assert torch.all(w.triu(1) == 0)  # causal: masked weights are exactly 0
    assert gpt(ids).attentions is None


def test_gpt_init_is_gpt2_style_and_loss_near_ln_vocab():
    torch.manual_seed(0)
    cfg = cfg_(vocab_size=211, d_model=32, n_layers=3, max_len=64)
    gpt = GPT(cfg)
    w = gpt.layers[0].ffn.fc1.weight
    assert abs(w.std().item() - 0.02) < 0.002
    assert torch.all(gpt.layers[1].self_attn.q_proj.bias == 0)
    assert torch.all(gpt.norm_f.weight == 1) and torch.all(gpt.norm_f.bias == 0)
    ids = torch.randint(0, 211, (4, 64))
    targets = torch.randint(0, 211, (4, 64))
    loss = gpt(ids, targets).loss
    assert loss.dim() == 0
    assert abs(loss.item() - math.log(211)) < 0.1, (loss.item(), math.log(211))
    # loss is the mean cross-entropy of the logits; -100 targets are skipped
    logits = gpt(ids).logits
    torch.testing.assert_close(loss, torch.nn.functional.cross_entropy(logits.reshape(-1, 211), targets.reshape(-1)))
    t2 = targets.clone()
    t2[:, :10] = -100
    torch.testing.assert_close(gpt(ids, t2).loss,
                               torch.nn.functional.cross_entropy(logits[:, 10:].reshape(-1, 211), targets[:, 10:].reshape(-1)))
    loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in gpt.parameters() if p.grad is not None)


def test_gpt_tied_and_untied_heads():
    tied, untied = GPT(cfg_()), GPT(cfg_(tie_weights=False))
    assert tied.lm_head.weight is tied.embed.tok_emb.weight
    assert untied.lm_head.weight is not untied.embed.tok_emb.weight
    n = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert n(untied) - n(tied) == V * 16


def test_post_norm_gpt_has_no_final_norm():
    gpt = GPT(cfg_(norm_first=False))
    assert gpt.norm_f is None and gpt.layers[0].norm_first is False
    assert GPT(cfg_()).norm_f is not None


@pytest.mark.parametrize("positional", POSITIONALS)
@pytest.mark.parametrize("norm_first", [True, False])
def test_gpt_cached_decoding_equals_full_recomputation(positional, norm_first):
    torch.manual_seed(0)
    gpt = GPT(cfg_(positional=positional, norm_first=norm_first, activation="swiglu" if norm_first else "gelu")).eval()
    randomise_norms(gpt)
    ids = torch.randint(0, V, (2, 9))
    full = gpt(ids, need_weights=True)
    cache = KVCache()
    chunks, pieces, start = [5, 1, 1, 2], [], 0
    for n in chunks:
        out = gpt(ids[:, start:start + n], cache=cache, need_weights=True)
        assert out.attentions[0].shape == (2, 4, n, start + n)  # queries see every held key
        torch.testing.assert_close(out.attentions[1], full.attentions[1][:, :, start:start + n, :start + n],
                                   atol=1e-5, rtol=1e-5)
        pieces.append(out.logits)
        start += n
        assert cache.seq_len == start
    torch.testing.assert_close(torch.cat(pieces, dim=1), full.logits, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("positional", POSITIONALS)
def test_gpt_future_tokens_never_change_earlier_logits(positional):
    torch.manual_seed(0)
    gpt = GPT(cfg_(positional=positional)).eval()
    ids = torch.randint(0, V, (1, 10))
    changed = ids.clone()
    changed[0, 6:] = (ids[0, 6:] + 1) % V
    a, b = gpt(ids).logits, gpt(changed).logits
    torch.testing.assert_close(a[:, :6], b[:, :6])
    assert not torch.allclose(a[:, 6:], b[:, 6:])


def test_kvcache_nbytes_formula():
    for dtype in (torch.float32, torch.bfloat16):
        gpt = GPT(cfg_(n_layers=3)).to(dtype).eval()
        cache = KVCache()
        gpt(torch.randint(0, V, (2, 5)), cache=cache)
        gpt(torch.randint(0, V, (2, 1)), cache=cache)
        es = torch.tensor([], dtype=dtype).element_size()
        assert cache.seq_len == 6 and cache.n_layers == 3
        assert cache.nbytes == 2 * 3 * 2 * 6 * 16 * es
        cache.reset()
        assert cache.seq_len == 0 and cache.nbytes == 0


def big_weights(model: torch.nn.Module) -> None:
    """At init (std 0.02) attention is nearly uniform, and uniform weights cannot see order
    either; trained-size weights make the scores matter."""
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.5)


def test_positions_change_gpt_and_none_does_not_see_order():
    """Swap two earlier tokens: with positions the last token's logits change; in a one-layer
    decoder without positions they cannot (the last query sees the same set of keys)."""
    torch.manual_seed(0)
    a, b = torch.tensor([[3, 4, 5]]), torch.tensor([[4, 3, 5]])
    for positional in ("learned", "sinusoidal", "rope"):
        gpt = GPT(cfg_(positional=positional, n_layers=1)).eval()
        big_weights(gpt)
        last = gpt(a).logits[0, -1], gpt(b).logits[0, -1]
        assert (last[0] - last[1]).abs().max() > 1e-3, positional
    gpt = GPT(cfg_(positional="none", n_layers=1)).eval()
    big_weights(gpt)
    torch.testing.assert_close(gpt(a).logits[0, -1], gpt(b).logits[0, -1])


# -------------------------------------------------------------------------------------- Encoder
@pytest.mark.parametrize("positional", POSITIONALS)
@pytest.mark.parametrize("norm_first", [True, False])
def test_encoder_real_tokens_unchanged_by_padding(positional, norm_first):
    torch.manual_seed(0)
    enc = Encoder(cfg_(positional=positional, norm_first=norm_first)).eval()
    randomise_norms(enc)
    ids = torch.randint(1, V, (1, 5))
    alone = enc(ids).hidden_states
    padded = torch.cat([ids, torch.zeros(1, 3, dtype=torch.long)], dim=1)
    mask = torch.tensor([[1] * 5 + [0] * 3])
    out = enc(padded, attention_mask=mask, need_weights=True)
    torch.testing.assert_close(out.hidden_states[:, :5], alone, atol=1e-5, rtol=1e-5)
    for w in out.attentions:
        assert torch.all(w[..., 5:] == 0)  # no query attends to padding
        torch.testing.assert_close(w.sum(-1), torch.ones(1, 4, 8))
    # ... and without the mask the padding does leak in (the mask is what protects them)
    assert not torch.allclose(enc(padded).hidden_states[:, :5], alone, atol=1e-4)


def test_encoder_without_positions_is_permutation_equivariant():
    torch.manual_seed(0)
    enc = Encoder(cfg_(positional="none")).eval()
    ids = torch.randint(0, V, (2, 6))
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    torch.testing.assert_close(enc(ids[:, perm]).hidden_states, enc(ids).hidden_states[:, perm], atol=1e-5, rtol=1e-5)
    learned = Encoder(cfg_()).eval()
    assert not torch.allclose(learned(ids[:, perm]).hidden_states, learned(ids).hidden_states[:, perm], atol=1e-4)


def test_encoder_is_bidirectional_and_norms():
    torch.manual_seed(0)
    enc = Encoder(cfg_()).eval()
    ids = torch.randint(0, V, (1, 6))
    changed = ids.clone()
    changed[0, -1] = (ids[0, -1] + 1) % V
    assert not torch.allclose(enc(ids).hidden_states[:, 0], enc(changed).hidden_states[:, 0])
    assert enc.norm_f is not None and Encoder(cfg_(norm_first=False)).norm_f is None
    w = enc(ids, need_weights=True).attentions[0]
    assert w.shape == (1, 4, 6, 6) and bool((w.triu(1) > 0).any())


def test_encoder_token_types_and_embedding_norm():
    torch.manual_seed(0)
    enc = Encoder(cfg_(type_vocab_size=2, embedding_norm=True, norm_first=False, layer_norm_eps=1e-12)).eval()
    assert enc.embed.norm is not None and enc.embed.type_emb.weight.shape == (2, 16)
    ids = torch.randint(0, V, (1, 4))
    zeros, ones = torch.zeros_like(ids), torch.ones_like(ids)
    torch.testing.assert_close(enc(ids).hidden_states, enc(ids, token_type_ids=zeros).hidden_states)
    assert not torch.allclose(enc(ids, token_type_ids=ones).hidden_states, enc(ids).hidden_states)
    with pytest.raises(ValueError, match="token id 2, outside \\[0, vocab_size=2\\)"):
        enc(ids, token_type_ids=ones * 2)
    with pytest.raises(ValueError, match="type_vocab_size=0"):
        Encoder(cfg_())(ids, token_type_ids=zeros)


# ------------------------------------------------------------------------------- EncoderDecoder
def test_encoder_decoder_shapes_loss_and_sharing():
    torch.manual_seed(0)
    s2s = EncoderDecoder(cfg_()).eval()
    assert s2s.lm_head.weight is s2s.encoder.embed.tok_emb.weight and s2s.embed is s2s.encoder.embed
    src, tgt = torch.randint(0, V, (2, 6)), torch.randint(0, V, (2, 4))
    out = s2s(src, tgt, tgt, need_weights=True)
    assert out.logits.shape == (2, 4, V) and out.loss.dim() == 0
    assert [w.shape for w in out.attentions] == [(2, 4, 4, 4)] * 2
    assert [w.shape for w in out.cross_attentions] == [(2, 4, 4, 6)] * 2
    assert [w.shape for w in out.encoder_attentions] == [(2, 4, 6, 6)] * 2
    for w in out.attentions:
        assert torch.all(w.triu(1) == 0)
    for w in out.cross_attentions:
        torch.testing.assert_close(w.sum(-1), torch.ones(2, 4, 4))
    # the decoder reads the source: a different source changes the logits
    assert not torch.allclose(s2s(src.flip(1), tgt).logits, out.logits)


@pytest.mark.parametrize("positional", POSITIONALS)
def test_encoder_decoder_cached_decoding_equals_full(positional):
    torch.manual_seed(0)
    s2s = EncoderDecoder(cfg_(positional=positional, norm_first=positional != "rope")).eval()
    randomise_norms(s2s)
    src, tgt = torch.randint(1, V, (2, 6)), torch.randint(1, V, (2, 7))
    src[1, 4:] = 0
    src_mask = (src != 0).long()
    full = s2s(src, tgt, src_attention_mask=src_mask, need_weights=True)
    memory, memory_mask, _ = s2s.encode(src, src_attention_mask=src_mask)
    cache, pieces, start = KVCache(), [], 0
    for n in (3, 1, 1, 2):
        out = s2s.decode(tgt[:, start:start + n], memory, memory_mask=memory_mask, cache=cache, need_weights=True)
        torch.testing.assert_close(out.cross_attentions[1], full.cross_attentions[1][:, :, start:start + n],
                                   atol=1e-5, rtol=1e-5)
        pieces.append(out.logits)
        start += n
    torch.testing.assert_close(torch.cat(pieces, 1), full.logits, atol=1e-5, rtol=1e-5)
    assert cache.nbytes == 2 * 2 * 2 * 7 * 16 * 4  # self-attention only; cross K/V not counted


def test_encoder_decoder_causal_and_source_padding():
    torch.manual_seed(0)
    s2s = EncoderDecoder(cfg_()).eval()
    src, tgt = torch.randint(1, V, (1, 5)), torch.randint(0, V, (1, 6))
    changed = tgt.clone()
    changed[0, 4:] = (tgt[0, 4:] + 1) % V
    torch.testing.assert_close(s2s(src, changed).logits[:, :4], s2s(src, tgt).logits[:, :4])
    padded = torch.cat([src, torch.zeros(1, 2, dtype=torch.long)], 1)
    mask = torch.tensor([[1] * 5 + [0] * 2])
    out = s2s(padded, tgt, src_attention_mask=mask, need_weights=True)
    torch.testing.assert_close(out.logits, s2s(src, tgt).logits, atol=1e-5, rtol=1e-5)
    assert all(torch.all(w[..., 5:] == 0) for w in out.cross_attentions)


# ------------------------------------------------------------------------------------ dtypes
@pytest.mark.parametrize("positional", ["learned", "sinusoidal", "rope"])
def test_every_model_runs_in_bfloat16_on_cpu(positional):
    torch.manual_seed(0)
    cfg = cfg_(positional=positional)
    ids = torch.randint(0, V, (2, 5))
    gpt = GPT(cfg).to(torch.bfloat16)
    out = gpt(ids, ids)
    assert out.logits.dtype == torch.bfloat16 and torch.isfinite(out.loss)
    out.loss.backward()
    assert gpt.generate(ids, 3, temperature=0.0).shape == (2, 8)
    enc = Encoder(cfg).to(torch.bfloat16)
    h = enc(ids, attention_mask=torch.ones_like(ids)).hidden_states
    assert h.dtype == torch.bfloat16 and torch.isfinite(h.float()).all()
    s2s = EncoderDecoder(cfg).to(torch.bfloat16)
    assert torch.isfinite(s2s(ids, ids, ids).loss)
    assert s2s.generate(ids, 3, bos_id=1).shape[1] <= 4


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_gpu_half_precision_matches_float32(dtype):
    torch.manual_seed(0)
    cfg = cfg_(d_model=64, n_heads=4, positional="rope")
    gpt = GPT(cfg).cuda().eval()
    ids = torch.randint(0, V, (2, 16), device="cuda")
    ref = gpt(ids).logits
    half = gpt.to(dtype)(ids).logits.float()
    torch.testing.assert_close(half, ref, atol=5e-2, rtol=5e-2)
    enc = Encoder(cfg).cuda().eval()
    ref = enc(ids).hidden_states
    torch.testing.assert_close(enc.to(dtype)(ids).hidden_states.float(), ref, atol=1e-1, rtol=5e-2)


# ---- issue 10 -----------------------------------------------------------------------------------

def test_loss_with_every_target_skipped_is_an_error_not_nan():
    model = GPT(cfg_())
    ids = torch.tensor([[1, 2, 3]])
    with pytest.raises(ValueError, match="every target is -100"):
        model(ids, torch.full_like(ids, -100))


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32])
def test_any_torch_integer_dtype_works_as_token_ids(dtype):
    torch.manual_seed(0)
    gpt, enc, s2s = GPT(cfg_()).eval(), Encoder(cfg_()).eval(), EncoderDecoder(cfg_()).eval()
    ids = torch.tensor([[1, 2, 3]])
    torch.testing.assert_close(gpt(ids.to(dtype), ids.to(dtype)).loss, gpt(ids, ids).loss)
    torch.testing.assert_close(enc(ids.to(dtype)).hidden_states, enc(ids).hidden_states)
    torch.testing.assert_close(s2s(ids.to(dtype), ids.to(dtype)).logits, s2s(ids, ids).logits)


def test_unsupported_unsigned_ids_name_the_dtypes_that_work():
    with pytest.raises(TypeError, match="torch.uint16.*int8, uint8, int16, int32 and int64 work"):
        GPT(cfg_())(torch.tensor([[1, 2]], dtype=torch.uint16))


def test_decode_with_unbatched_memory_says_so():
    s2s = EncoderDecoder(cfg_())
    memory, _, _ = s2s.encode(torch.tensor([[1, 2, 3]]))
    with pytest.raises(ValueError, match=r"memory must be the encoder output.*got \(3, .*memory\[None\]"):
        s2s.decode(torch.tensor([[1]]), memory[0])
