"""Bad input gets an error that says what was wrong: never a bare error from inside torch, never
a silent NaN, never nonsense accepted. One case per line; each names the call and the words the
message must contain. (Found by probing every public entry point with malformed arguments.)"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import attnlib
from attnlib import interop, masks, quant, realwords, viz
from attnlib import (KVCache, MultiHeadAttention, RMSNorm, RotaryEmbedding, TransformerConfig, causal_mask,
                     sample_next, scaled_dot_product_attention as sdpa, top_p_filter)
from attnlib.layers import FeedForward
from attnlib.positional import LearnedPositionalEmbedding, sinusoidal_table

torch.manual_seed(0)
Q = torch.randn(1, 2, 4, 8)
X = torch.randn(2, 3, 8)
SMALL = dict(vocab_size=11, d_model=8, n_heads=2, n_layers=2, max_len=8)


def gpt(**kw) -> attnlib.GPT:
    torch.manual_seed(0)
    return attnlib.GPT(TransformerConfig(**{**SMALL, **kw})).eval()


def paged_pool() -> attnlib.PagedKVCache:
    """A pool holding sequence 0: 5 positions of the small GPT (2 heads of width 4)."""
    model = gpt()
    pool = attnlib.PagedKVCache.for_model(model, n_blocks=4, block_size=4)
    model(torch.tensor([[1, 2, 3, 4, 5]]), cache=pool.sequence(0))
    return pool


@pytest.mark.parametrize("backend", ["math", "sdpa"])
@pytest.mark.parametrize("kw, error, words", [
    (dict(attn_mask=torch.full((4, 4), math.nan)), ValueError, "holds NaN"),
    (dict(attn_mask=torch.zeros(4, 4).fill_diagonal_(math.inf)), ValueError, r"holds \+inf"),
    (dict(scale=math.nan), ValueError, "scale must be finite"),
    (dict(scale=math.inf), ValueError, "scale must be finite"),
    (dict(scale="a"), TypeError, "scale must be a number"),
    (dict(dropout_p="x"), TypeError, "dropout_p must be a number"),
])
def test_attention_arguments(backend, kw, error, words):
    with pytest.raises(error, match=words):
        sdpa(Q, Q, Q, backend=backend, **kw)


@pytest.mark.parametrize("backend", ["math", "sdpa"])
def test_attention_over_no_keys_is_zeros_like_a_fully_masked_row(backend):
    empty = torch.randn(1, 2, 0, 8)
    out = sdpa(Q, empty, empty, backend=backend)[0]
    assert out.shape == (1, 2, 4, 8) and torch.equal(out, torch.zeros_like(out))
    assert sdpa(empty, empty, empty, backend=backend)[0].shape == (1, 2, 0, 8)


def test_a_float_mask_of_finite_biases_and_minus_inf_is_accepted():
    mask = torch.zeros(4, 4).masked_fill(~causal_mask(4), -math.inf) + 0.5
    out, w = sdpa(Q, Q, Q, attn_mask=mask, need_weights=True)
    assert torch.isfinite(out).all() and torch.allclose(w.sum(-1), torch.ones(1, 2, 4))


@pytest.mark.parametrize("mask, error, words", [
    (torch.ones(3, 5, dtype=torch.bool), ValueError, r"attn_mask of shape \(3, 5\) does not broadcast"),
    (torch.zeros(3, 5), ValueError, r"attn_mask of shape \(3, 5\) does not broadcast"),
    (torch.ones(3, 3, dtype=torch.long), TypeError, "attn_mask must be bool"),
    ([[True]], TypeError, "attn_mask must be a torch.Tensor"),
])
def test_mha_checks_a_mask_before_adding_the_causal_triangle(mask, error, words):
    mha = MultiHeadAttention(8, 4, n_kv_heads=2)
    with pytest.raises(error, match=words):
        mha(X, attn_mask=mask, is_causal=True)


def test_a_cache_must_be_a_kvcache():
    with pytest.raises(TypeError, match="cache must be an attnlib.KVCache or None, got dict"):
        MultiHeadAttention(8, 2)(X, cache={})
    with pytest.raises(TypeError, match="cache must be an attnlib.KVCache or None, got str"):
        gpt()(torch.tensor([[1, 2]]), cache="x")


def test_a_bad_mask_leaves_a_direct_caller_s_cache_as_it_was():
    mha = MultiHeadAttention(8, 2).eval()
    cache = KVCache()
    mha(X[:1], is_causal=True, cache=cache)
    with pytest.raises(ValueError, match=r"attn_mask of shape \(3, 7\)"):
        mha(X[:1, :1], attn_mask=torch.ones(3, 7, dtype=torch.bool), is_causal=True, cache=cache)
    assert cache.seq_len == 3


@pytest.mark.parametrize("k, v, error, words", [
    (torch.randn(2, 1, 4), torch.randn(2, 1, 4), ValueError, r"\(B, G, T_new, D\)"),
    (torch.randn(1, 2, 1, 4), torch.randn(1, 1, 1, 4), ValueError, "same batch, heads and length"),
    (torch.randn(1, 2, 1, 4), torch.randn(1, 2, 2, 4), ValueError, "same batch, heads and length"),
    ([1.0], [1.0], TypeError, "must be torch.Tensors"),
])
def test_kvcache_update_checks_its_arguments(k, v, error, words):
    with pytest.raises(error, match=words):
        KVCache().update(0, k, v)


@pytest.mark.parametrize("logits, kw, error, words", [
    (torch.randn(2, 0), {}, ValueError, "V >= 1"),
    (torch.tensor(1.0), {}, ValueError, "V >= 1"),
    ([[1.0, 2.0]], {}, TypeError, "logits must be a torch.Tensor"),
    (torch.ones(1, 3, dtype=torch.bool), {}, TypeError, "real numbers"),
    (torch.randn(1, 5), dict(generator="g"), TypeError, "generator must be a torch.Generator"),
])
def test_sample_next_arguments(logits, kw, error, words):
    with pytest.raises(error, match=words):
        sample_next(logits, **kw)


def test_sampling_takes_numpy_numbers_and_integer_scores():
    model, prompt = gpt(), torch.tensor([[1, 2]])
    g = lambda: torch.Generator().manual_seed(0)  # noqa: E731
    ref = model.generate(prompt, 2, top_k=3, top_p=0.9, generator=g())
    got = model.generate(prompt, np.int64(2), top_k=np.int64(3), top_p=np.float32(0.9), generator=g())
    assert torch.equal(ref, got)
    assert sample_next(torch.tensor([[1, 5, 2]]), temperature=0.0).tolist() == [[1]]
    assert causal_mask(np.int64(3)).shape == (3, 3)
    # any leading dims, one token per row; an infinite temperature is uniform over finite logits
    assert sample_next(torch.randn(11), temperature=0.0).shape == (1,)
    assert sample_next(torch.randn(2, 3, 11), generator=g()).shape == (2, 3, 1)
    assert top_p_filter(torch.randn(2, 3, 10), 0.9).shape == (2, 3, 10)
    picks = torch.cat([sample_next(torch.tensor([[0.0, 9.0, -math.inf]]), temperature=math.inf,
                                   generator=torch.Generator().manual_seed(i)) for i in range(300)])
    counts = picks.flatten().bincount(minlength=3).tolist()
    assert counts[2] == 0 and min(counts[:2]) > 100, counts


@pytest.mark.parametrize("logits, top_p, error, words", [
    (torch.randn(1, 4), None, ValueError, "top_p must be a number"),
    (torch.tensor([[math.nan, 1.0, 2.0]]), 0.5, ValueError, "NaN"),
    (torch.full((1, 3), -math.inf), 0.5, ValueError, "no finite logit"),
    ([[1.0]], 0.5, TypeError, "torch.Tensor"),
])
def test_top_p_filter_arguments(logits, top_p, error, words):
    with pytest.raises(error, match=words):
        top_p_filter(logits, top_p)


def test_encoder_decoder_needs_a_start_token():
    s2s = attnlib.EncoderDecoder(TransformerConfig(**SMALL)).eval()
    with pytest.raises(TypeError, match="bos_id must be an int token id, got NoneType"):
        s2s.generate(torch.tensor([[1, 2]]), 2, bos_id=None)


@pytest.mark.parametrize("mask, value", [
    (torch.tensor([[0.0, 0.0, -math.inf]]), "-inf"),  # an additive mask: would read inverted
    (torch.tensor([[0.0, 0.0, -1e4]]), "-10000.0"),
    (torch.tensor([[1, 2, 0]]), "2"),
    (torch.tensor([[1.0, math.nan, 1.0]]), "nan"),
])
def test_an_attention_mask_holds_only_one_and_zero(mask, value):
    """1 real / 0 pad: another value (an additive mask's -inf, a count) is refused, never read as
    "not zero, so real"; bool, integer and float masks of 0 and 1 all read the same."""
    enc = attnlib.Encoder(TransformerConfig(**SMALL)).eval()
    s2s = attnlib.EncoderDecoder(TransformerConfig(**SMALL)).eval()
    ids = torch.tensor([[1, 2, 3]])
    words = rf"holds 1 for a real token and 0 for padding, got the value {value};"
    with pytest.raises(ValueError, match="attention_mask " + words):
        enc(ids, attention_mask=mask)
    with pytest.raises(ValueError, match="src_attention_mask " + words):
        s2s(ids, ids, src_attention_mask=mask)
    with pytest.raises(ValueError, match=r"pass \(src_attention_mask == 0\).long\(\)"):
        s2s.generate(ids, 2, bos_id=1, src_attention_mask=mask)
    same = [enc(ids, attention_mask=m).hidden_states[:, :2]
            for m in (torch.tensor([[True, True, False]]), torch.tensor([[1, 1, 0]]),
                      torch.tensor([[1.0, 1.0, 0.0]]))]
    assert torch.equal(same[0], same[1]) and torch.equal(same[0], same[2])


@pytest.mark.parametrize("make, error, words", [
    (lambda: RMSNorm(4, eps="x"), TypeError, "eps must be a positive number"),
    (lambda: RMSNorm(4, eps=math.inf), ValueError, "eps must be positive and finite"),
    (lambda: RMSNorm(4)(torch.tensor([[1, 2, 3, 4]])), TypeError, "floating-point"),
    (lambda: RotaryEmbedding(8, base="x"), TypeError, "base must be a positive number"),
    (lambda: RotaryEmbedding(8, base=math.nan), ValueError, "base must be positive and finite"),
    (lambda: TransformerConfig(**SMALL, rope_base=math.inf), ValueError, "rope_base"),
    (lambda: TransformerConfig(**SMALL, layer_norm_eps=math.inf), ValueError, "layer_norm_eps"),
    (lambda: TransformerConfig(**SMALL, layer_norm_eps="x"), TypeError, "layer_norm_eps must be a number"),
    (lambda: TransformerConfig(**SMALL, dropout="0"), TypeError, "dropout must be a number"),
    (lambda: TransformerConfig(**SMALL, pad_id=1.5), TypeError, "pad_id must be an int"),
    (lambda: TransformerConfig(**SMALL, norm_first="no"), TypeError, "norm_first must be True or False"),
    (lambda: TransformerConfig(**SMALL, tie_weights=None), TypeError, "tie_weights must be True or False"),
    (lambda: FeedForward(8, 32)(torch.randn(2, 6)), ValueError, r"\(\.\.\., d_model=8\), got \(2, 6\)"),
    (lambda: FeedForward(0, 32), ValueError, "d_model must be a positive int"),
    (lambda: LearnedPositionalEmbedding(0, 4), ValueError, "max_len must be a positive int"),
    (lambda: sinusoidal_table(2.5, 4), ValueError, "max_len must be a positive int"),
    # attnlib.Embeddings called on its own: float ids were truncated to ints, silently; an id
    # outside the table was torch's "index out of range in self"
    (lambda: attnlib.Embeddings(TransformerConfig(**SMALL))(torch.tensor([[1.7, 2.2]]),
                                                           torch.arange(2)),
     TypeError, "input_ids must be an integer tensor"),
    (lambda: attnlib.Embeddings(TransformerConfig(**SMALL))(torch.tensor([[11]]), torch.arange(1)),
     ValueError, r"input_ids contains token id 11, outside \[0, vocab_size=11\)"),
    (lambda: attnlib.Embeddings(TransformerConfig(**SMALL))(torch.tensor([[1]]), torch.arange(1),
                                                           torch.tensor([[0]])),
     ValueError, "no token-type table"),  # was ignored
    # paged_attention: torch's KeyError / IndexError, or a mask error about (1, 1, 8, 6)
    (lambda: attnlib.paged_attention(Q, paged_pool(), 0, ["nope"]), ValueError,
     r"seq_ids \['nope'\] are not in the pool \(it holds \[0\]\)"),
    (lambda: attnlib.paged_attention(Q, paged_pool(), 5, [0]), ValueError,
     r"layer must be an int in \[0, 2\)"),
    (lambda: attnlib.paged_attention(Q[0], paged_pool(), 0, [0]), ValueError,
     r"query must be \(B, H, T_new, D\) = \(1, H, T_new, 4\)"),
    # RoPE angles for another width or length: torch's "size of tensor a must match" before
    (lambda: MultiHeadAttention(8, 2)(X, rope=RotaryEmbedding(2).cos_sin(torch.arange(3))),
     ValueError, r"rope's cos must have shape \(Tq, 4\) = \(3, 4\), one row per position of x, "
     r"got \(3, 2\); make it with RotaryEmbedding\(4\)"),
    (lambda: attnlib.MultiHeadLatentAttention(8, 2, kv_lora_rank=4, qk_nope_head_dim=4,
                                              qk_rope_head_dim=2, v_head_dim=4)(
        X, rope=RotaryEmbedding(2).cos_sin(torch.arange(5))), ValueError, r"got \(5, 2\)"),
    (lambda: MultiHeadAttention(8, 2)(X, rope=torch.ones(3, 4)), TypeError,
     r"the \(cos, sin\) pair of tensors .* got Tensor"),
    (lambda: MultiHeadAttention(8, 2)(X, context=X, rope=RotaryEmbedding(4).cos_sin(torch.arange(3))),
     ValueError, "with a context \\(cross-attention\\) pass rope=None"),  # was ignored
])
def test_modules_and_configs(make, error, words):
    with pytest.raises(error, match=words):
        make()


def test_token_ids_to_decode_are_ints():
    tok = attnlib.CharTokenizer("abc")
    for bad, error, words in (([1.7], TypeError, "token ids must be ints, got float"),
                              ("ab", TypeError, "sequence of int token ids, got str"),
                              (None, TypeError, "sequence of int token ids, got NoneType")):
        with pytest.raises(error, match=words):
            tok.decode(bad)
    assert tok.decode([np.int64(0), 1]) == "ab"


# --- the rest of the library: training, masks, quantization, pictures, data helpers -----------
def corpus() -> torch.Tensor:
    return torch.randint(0, 11, (200,), generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("kw, error, words", [
    (dict(lr=math.inf), ValueError, "lr must be a finite number >= 0"),
    (dict(lr="x"), TypeError, "lr must be a number"),
    (dict(lr=-1.0), ValueError, "lr must be a finite number >= 0"),
    (dict(grad_clip=math.nan), ValueError, "grad_clip must be a finite number"),
    (dict(grad_clip=-1.0), ValueError, "grad_clip must be a finite number >= 0"),
    (dict(weight_decay="x"), TypeError, "weight_decay must be a number"),
    (dict(batch_size=2.5), ValueError, "batch_size must be a positive int"),
    (dict(block_size=8.0), ValueError, "block_size must be a positive int"),
    (dict(generator="s"), TypeError, "generator must be a torch.Generator"),
    (dict(callback=5), TypeError, "callback must be callable"),
    (dict(pad_id="x"), TypeError, "pad_id must be an int"),
])
def test_train_arguments(kw, error, words):
    args = {**dict(steps=2, batch_size=4, block_size=8), **kw}
    with pytest.raises(error, match=words):
        attnlib.train(gpt(), corpus(), **args)


def test_train_refuses_what_is_not_a_model_and_stops_at_a_nan_loss():
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        attnlib.train("x", corpus(), steps=1, block_size=8)
    with pytest.raises(ValueError, match=r"for a corpus of token ids pass a 1-D tensor"):
        attnlib.train(gpt(), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], steps=1, block_size=4)
    with pytest.raises(ValueError, match=r"2 tokens.*\(4, 1\)"):
        attnlib.train(gpt(), torch.zeros(4, 1, dtype=torch.long), steps=1)
    broken = gpt()
    with torch.no_grad():
        broken.layers[0].ffn.fc1.weight.fill_(math.inf)  # overflowed weights: every logit NaN
    with pytest.raises(ValueError, match="loss at step 1 is nan: the weights or activations overflowed"):
        attnlib.train(broken, corpus(), steps=2, batch_size=4, block_size=8)
    s2s = attnlib.EncoderDecoder(TransformerConfig(**SMALL))
    before = [p.clone() for p in s2s.parameters()]
    src, tgt = torch.randint(1, 11, (4, 5)), torch.zeros(4, 3, dtype=torch.long)  # all padding
    with pytest.warns(UserWarning, match="every target in the batch is padding"):
        losses = attnlib.train(s2s, (src, tgt), steps=1, batch_size=2, bos_id=1, pad_id=0)
    assert math.isnan(losses[0]) and all(torch.equal(a, b) for a, b in zip(before, s2s.parameters()))


@pytest.mark.parametrize("make, error, words", [
    # each of these ended in an error from inside torch or re, or in no error at all
    (lambda: attnlib.batches.sample_batch(corpus(), 0, 8, torch.Generator()), ValueError,
     "batch_size must be an int >= 1"),  # was torch.stack's "expects a non-empty TensorList"
    (lambda: attnlib.gptq_quantize(torch.randn(4, 8), torch.full((16, 8), math.nan)), ValueError,
     "inputs holds NaN or inf"),  # was linalg.cholesky's "not positive-definite"
    (lambda: realwords.generate_long(gpt(), torch.tensor([[1]]), -1), ValueError,
     "max_new_tokens must be an int >= 0"),  # returned the prompt
    (lambda: realwords.sample_texts(gpt(), attnlib.CharTokenizer("abcdefghijk"), "", 5),
     ValueError, "prompt must hold at least one character"),  # was "got dtype torch.float32"
    (lambda: realwords.words_of(5), TypeError, "text must be a str, got int"),
    (lambda: attnlib.load_corpus(()), ValueError, "books is empty"),  # returned ""
    (lambda: attnlib.quantize_linears(gpt(), lambda w: w * math.nan), ValueError,
     r"fn returned NaN or inf for layers.0.self_attn.q_proj's weight"),  # a NaN model, silently
    (lambda: attnlib.train(gpt(), lambda gen: "abc", steps=1), TypeError,
     r"data\(generator\) must return a \(B, T \+ 1\) tensor"),  # was "'str' has no 'to'"
    (lambda: attnlib.tiled_attention(Q, Q, Q, scale=math.nan), ValueError, "scale must be finite"),
    (lambda: attnlib.tiled_attention(Q, Q, Q, scale="a"), TypeError, "scale must be a number"),
    (lambda: masks.to_additive(causal_mask(3), fill=math.nan), ValueError, "fill must be -inf or a finite"),
    (lambda: masks.to_additive(causal_mask(3), fill=math.inf), ValueError, "fill must be -inf or a finite"),
    (lambda: masks.from_additive(torch.tensor([0.0, math.nan])), ValueError, "NaN or \\+inf"),
    (lambda: masks.to_nn_mha(torch.ones(1, 1, 3, 3, dtype=torch.bool), n_heads=0), ValueError,
     "n_heads must be a positive int"),
    (lambda: masks.from_nn_mha(torch.ones(4, 3, 3, dtype=torch.bool), n_heads=2.0), ValueError,
     "n_heads must be a positive int"),
    (lambda: quant.quantize_rows(torch.tensor([[1.0, math.inf, 2.0]])), ValueError, "NaN or inf"),
    (lambda: quant.quantize_nf4(torch.full((1, 64), math.nan)), ValueError, "NaN or inf"),
    (lambda: quant.quantize_rows(torch.randn(4, 0)), ValueError, "no weights"),
    (lambda: quant.dequantize_rows(torch.zeros(4, 8, dtype=torch.int8), torch.ones(1, 4)), ValueError,
     "one parameter per row"),
    (lambda: quant.dequantize_nf4(torch.full((1, 1, 64), 20, dtype=torch.uint8), torch.ones(1, 1, 1)),
     ValueError, "codes lie in 0..15"),
    (lambda: quant.dequantize_nf4(torch.zeros(1, 1, 64), torch.ones(1, 1, 1)), TypeError, "integer tensor"),
    (lambda: quant.pack_q4_1(torch.full((1, 32), -1, dtype=torch.int8), torch.ones(1, 1), torch.ones(1, 1)),
     ValueError, "codes lie in 0..15"),
    (lambda: quant.bits_per_weight("nf4", block=0), ValueError, "block must be an int >= 1"),
    (lambda: quant.quantize_linears(gpt(), lambda w: w.sum()), ValueError, "fn must return a tensor"),
    (lambda: attnlib.LoRALinear("x", 4), TypeError, "base must be a torch.nn.Linear"),
    (lambda: attnlib.LoRALinear(torch.nn.Linear(4, 4), 0), ValueError, "r must be an int >= 1"),
    (lambda: attnlib.LoRALinear(torch.nn.Linear(4, 4), 2.0), TypeError, "r must be an int"),
    (lambda: attnlib.LoRALinear(torch.nn.Linear(4, 4), 2, alpha=-1.0), ValueError, "alpha must be a finite"),
    (lambda: attnlib.LoRALinear(torch.nn.Linear(4, 4), 2, alpha="a"), TypeError, "alpha must be a number"),
    (lambda: attnlib.LoRALinear(torch.nn.Linear(4, 4), 2, generator=0), TypeError, "generator must be"),
    (lambda: attnlib.add_lora(gpt(), 2, where=lambda n: False), ValueError, "picked no nn.Linear"),
    (lambda: attnlib.add_lora("x", 2), TypeError, "model must be a torch.nn.Module"),
    (lambda: attnlib.merge_lora(None), TypeError, "model must be a torch.nn.Module"),
    (lambda: interop.mha_to_torch("x"), TypeError, "attnlib.MultiHeadAttention"),
    (lambda: interop.mha_from_torch(MultiHeadAttention(8, 2)), TypeError, "nn.MultiheadAttention"),
    (lambda: attnlib.layers.EncoderLayer(16, 2, 32)(torch.randn(1, 3, 8)), ValueError, "d_model=16"),
    (lambda: attnlib.layers.EncoderLayer(16, 2, 32, layer_norm_eps=math.nan), ValueError, "eps must be"),
    (lambda: FeedForward(8, 16)(torch.ones(2, 8, dtype=torch.long)), TypeError, "floating-point"),
    # was torch's "mat1 and mat2 must have the same dtype"
    (lambda: FeedForward(8, 16)(torch.ones(2, 8, dtype=torch.float64)), TypeError,
     r"x has dtype torch.float64 but the module's weights are torch.float32"),
    # ids into a layer: the advice was module.to(torch.int64)
    (lambda: attnlib.layers.EncoderLayer(8, 2, 16)(torch.ones(1, 3, 8, dtype=torch.long)), TypeError,
     "x must be a floating-point tensor \\(hidden states\\)"),
    (lambda: attnlib.positional.rotate_half(torch.randn(2, 3)), ValueError, "must be even"),
    (lambda: attnlib.seed_everything("a"), ValueError, "seed must be an int"),
    (lambda: attnlib.seed_everything(0, threads=0), ValueError, "threads must be a positive int"),
    (lambda: attnlib.CharTokenizer(None), TypeError, "chars must be a str"),
    (lambda: attnlib.CharTokenizer([1, 2]), ValueError, "single characters"),
    (lambda: attnlib.BPETokenizer(merges=[(1, 2), (1, 2)]), ValueError, "repeats the pair"),
    (lambda: attnlib.BPETokenizer().encode(None), TypeError, "text must be a str"),
    (lambda: attnlib.BPETokenizer.train(None, 5), TypeError, "text must be a str"),
    (lambda: attnlib.evaluate.loss_by_position("x", corpus(), 8), TypeError, "model must be a torch.nn.Module"),
    (lambda: attnlib.logit_lens(attnlib.Encoder(gpt().cfg), torch.tensor([[1, 2]])), TypeError,
     "model must be an attnlib.GPT"),
    (lambda: attnlib.logit_lens(gpt(), torch.tensor([[1, 2]]), logits_to_keep=1.0), TypeError,
     "logits_to_keep must be an int"),
    (lambda: attnlib.logit_lens(gpt(), torch.tensor([[1, 2]]), logits_to_keep=-1), ValueError,
     "logits_to_keep must be >= 0"),
    (lambda: attnlib.logit_lens(gpt(), torch.tensor([1, 2])), ValueError, "input_ids"),
    (lambda: quant.quantize_linears("x", lambda w: w), TypeError, "model must be a torch.nn.Module"),
    (lambda: masks.to_additive(torch.tensor([0.0, math.nan])), ValueError, "NaN or \\+inf"),
    (lambda: gpt().embed(torch.tensor([[1, 2, 3]]), torch.arange(4)), ValueError, "positions must be"),
    (lambda: next(attnlib.stream_reply("x", None, [])), TypeError, "model must be an attnlib.GPT"),
])
def test_library_helpers(make, error, words):
    with pytest.raises(error, match=words):
        make()


@pytest.mark.parametrize("make, error, words", [
    (lambda: viz.heatmap(torch.rand(3, 3), digits=-1), ValueError, "digits must be an int >= 0"),
    (lambda: viz.heatmap(torch.rand(3, 3), row_tokens=5), TypeError, "row_tokens must be a sequence"),
    (lambda: viz.heatmap(torch.rand(3, 3), vmin="a"), TypeError, "vmin must be a number"),
    (lambda: viz.heatmap(torch.rand(2, 2), figsize=(0, -1)), ValueError,
     r"figsize must be \(width, height\) in inches"),  # was matplotlib's, naming no argument
    (lambda: viz.heatmap([[1, 2], [3]]), TypeError, "rows of equal length"),
    (lambda: viz.heatmap(torch.rand(2, 2, dtype=torch.complex64)), TypeError, "real numbers"),
    (lambda: viz.heatmap(torch.rand(2, 2), blocked=torch.ones(2, 2)), TypeError,
     "blocked must be a bool matrix"),
    (lambda: viz.heatmap(torch.rand(2, 2), blocked=torch.ones(2, 3, dtype=torch.bool)), ValueError,
     "blocked must have the weights' shape"),
    (lambda: viz.attention_explorer(None, list("abc")), TypeError, "need_weights=True"),
    (lambda: viz.attention_explorer(torch.rand(2, 3, 3), None), TypeError, "tokens must be a list"),
    (lambda: viz.attention_explorer(torch.rand(2, 3, 3), list("abc"), batch_index="0"), TypeError,
     "batch_index must be an int"),
    # one str where a list of names goes: it named one example (or choice) per character
    (lambda: viz.explorer(torch.rand(3, 3), examples="x"), TypeError,
     r"examples must be a list of names, one per example, got 'x'; for one example pass \['x'\]"),
    (lambda: viz.attention_explorer([torch.rand(3, 3)], list("abc"), examples="one"), TypeError,
     "examples must be a list of names"),  # was "examples has 3 names but data has 1"
    (lambda: viz.vector_explorer([torch.randn(2)], [torch.randn(3, 2)], examples="a"), TypeError,
     "examples must be a list of names"),
    (lambda: viz.mask_explorer([torch.randn(3, 4)], [torch.randn(3, 4)], [list("abc")],
                               examples="a"), TypeError, "examples must be a list of names"),
    (lambda: viz.exercise("Which?", "a", choices="abc"), TypeError,
     "choices must be a list of options, got one str 'abc'"),
])
def test_pictures(make, error, words):
    with pytest.raises(error, match=words):
        make()


def test_live_page_and_saved_model_arguments(tmp_path):
    tok = attnlib.CharTokenizer("abcdefghijk")
    model = gpt(positional="learned")
    with pytest.raises(ValueError, match="finite temperature"):
        viz.live_model(model, tok, prompt="abc", temperature=math.inf)
    with pytest.raises(TypeError, match="seed must be an int"):
        viz.live_model(model, tok, prompt="abc", seed=1.5)
    with pytest.raises(ValueError, match="prompt: character"):
        viz.live_model(model, tok, prompt="XYZ")
    broken = gpt()
    with torch.no_grad():
        broken.layers[0].ffn.fc1.weight[0, 0] = math.nan
    with pytest.raises(ValueError, match="NaN or inf weights"):
        viz.live_model(broken, tok, prompt="abc")
    with pytest.raises(ValueError, match=r"extra may not set \['vocab'\]"):
        attnlib.save_tiny_gpt(model, tok, tmp_path / "m.safetensors", extra={"vocab": '["a"]'})


def test_dates_and_corpus_arguments():
    import datetime as dt

    from attnlib import dates

    with pytest.raises(TypeError, match="no time of day"):
        dates.date_pairs(2, first=dt.datetime(2020, 1, 1, 12), last=dt.date(2020, 1, 9))
    with pytest.raises(ValueError, match="is before first"):
        dates.date_pairs(2, first=dt.date(2020, 1, 10), last=dt.date(2020, 1, 1))
    with pytest.raises(TypeError, match="token ids must be ints, got float"):
        dates.DateTokenizer().tokens([1.7])
    with pytest.raises(TypeError, match="text must be a str"):
        dates.DateTokenizer().encode(None)
    with pytest.raises(ValueError, match="max_chars must be >= 1, got 1.5"):
        attnlib.load_corpus(max_chars=1.5)
    with pytest.raises(TypeError, match="books must be a list"):
        attnlib.load_corpus(books=5)
