"""Bad input, third probe (issue 44): one test per defect it found, each failing before its fix.

Each case ends in the right result (adapters that every reader of ``.weight`` sees and merging
keeps, an RMSNorm that neither loses float64 nor overflows, quantized +-3e38 weights, a tiny-GPT
vocabulary in its own order) or in a clear TypeError / ValueError that names the argument."""
from __future__ import annotations


import numpy as np
import pytest
import torch
from torch import nn

import attnlib
from attnlib import LoRALinear, TransformerConfig, add_lora, merge_lora, quant
from attnlib.train import teacher_forcing

SMALL = dict(vocab_size=11, d_model=8, n_heads=2, n_layers=2, max_len=16)


def gpt(**kw) -> attnlib.GPT:
    torch.manual_seed(0)
    return attnlib.GPT(TransformerConfig(**{**SMALL, **kw})).eval()


def randomise_adapters(model: nn.Module, seed: int, only_outer: bool = False) -> None:
    """Nonzero B everywhere (B starts at 0, where an adapter changes nothing)."""
    g = torch.Generator().manual_seed(seed)
    inner = {id(m.base) for m in model.modules() if isinstance(m, LoRALinear)}
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, LoRALinear) and not (only_outer and id(m) in inner):
                m.lora_B.copy_(torch.randn(m.lora_B.shape, generator=g) * 0.5)


def lora_gpt(**kw) -> tuple[attnlib.GPT, nn.Module]:
    base = gpt(**kw)
    adapted = add_lora(base, 2, generator=torch.Generator().manual_seed(0))
    randomise_adapters(adapted, 1)
    return base, adapted


IDS = torch.tensor([[1, 2, 3, 4, 5, 6, 7], [7, 6, 5, 4, 3, 2, 1]])


# --- 1. LoRA: stacked adapters, and .weight ------------------------------------------------------
def test_stacked_adapters_all_survive_merge():
    """add_lora on a model with adapters wrapped the inner nn.Linear; merge_lora then dropped the
    inner adapter and left a stray `base` child on the merged layer."""
    base, once = lora_gpt()
    twice = add_lora(once, 3, generator=torch.Generator().manual_seed(2))
    randomise_adapters(twice, 3, only_outer=True)
    with torch.no_grad():
        stacked, single = twice(IDS).logits, once(IDS).logits
        assert (stacked - single).abs().max() > 0.1  # the second adapter does something
        merged = merge_lora(twice)
        torch.testing.assert_close(merged(IDS).logits, stacked, atol=1e-5, rtol=1e-5)
    assert not any(isinstance(m, LoRALinear) for m in merged.modules())
    assert sorted(merged.state_dict()) == sorted(base.state_dict())  # no stray children
    # only the new adapters train; the first ones are frozen with the base
    trained = [n for n, p in twice.named_parameters() if p.requires_grad]
    assert trained and all(".base." not in n for n in trained)
    q = twice.layers[0].self_attn.q_proj
    assert isinstance(q, LoRALinear) and isinstance(q.base, LoRALinear)
    assert isinstance(q.base.base, nn.Linear)


def test_merge_lora_of_a_shared_adapter_and_of_one_linear():
    layer = add_lora(nn.Linear(4, 3), 2)  # the model is one linear layer: no stray "" child
    assert isinstance(layer, LoRALinear) and not hasattr(layer.base, "base")
    shared = nn.Sequential(layer, nn.ReLU(), layer)  # the same adapter twice: both merged
    randomise_adapters(shared, 0)
    x = torch.randn(5, 4)
    with torch.no_grad():
        out = merge_lora(nn.Sequential(layer, nn.ReLU()))(x)
        torch.testing.assert_close(out, torch.relu(layer(x)))
    merged = merge_lora(shared)
    assert not any(isinstance(m, LoRALinear) for m in merged.modules())
    assert merged[0] is merged[2]


def test_lora_weight_is_the_effective_weight():
    """LoRALinear.weight returned the frozen base weight: every reader of .weight ignored B A."""
    layer = LoRALinear(nn.Linear(6, 5), 2, alpha=4.0, generator=torch.Generator().manual_seed(0))
    randomise_adapters(layer, 1)
    expected = layer.base.weight + 2.0 * layer.lora_B @ layer.lora_A
    torch.testing.assert_close(layer.weight, expected)
    torch.testing.assert_close(layer.merged().weight, expected)
    x = torch.randn(3, 6)
    torch.testing.assert_close(layer(x), nn.functional.linear(x, layer.weight, layer.bias))


def test_readers_of_weight_see_the_adapters():
    """head_output_norms and mha_to_torch of a LoRA model equal those of the merged model."""
    _, adapted = lora_gpt()
    merged = merge_lora(adapted)
    x = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(4))
    ours, plain = adapted.layers[1].self_attn, merged.layers[1].self_attn
    norms = attnlib.head_output_norms(ours, x)
    torch.testing.assert_close(norms, attnlib.head_output_norms(plain, x))
    ref, ref_plain = attnlib.mha_to_torch(ours), attnlib.mha_to_torch(plain)
    for (name, a), (_, b) in zip(ref.state_dict().items(), ref_plain.state_dict().items()):
        torch.testing.assert_close(a, b, msg=name)
    with torch.no_grad():
        torch.testing.assert_close(ref(x, x, x)[0], ours(x)[0], atol=1e-5, rtol=1e-5)


def test_exports_of_a_lora_model_carry_the_adapters(tmp_path):
    """The live page and the tiny-GPT file took the base weights (or the adapters' names)."""
    _, adapted = lora_gpt(tie_weights=True)
    tok = attnlib.CharTokenizer("abcdefghijk")
    with torch.no_grad():
        want = adapted(IDS).logits
        live = attnlib.viz.live_model(adapted, tok, prompt="abc", weights="float32", lab=False)
        torch.testing.assert_close(live.reference_model()(IDS).logits, want, atol=1e-5, rtol=1e-5)
        path = attnlib.save_tiny_gpt(adapted, tok, tmp_path / "lora.safetensors")
        loaded, _ = attnlib.load_tiny_gpt(path)
        torch.testing.assert_close(loaded(IDS).logits, want, atol=1e-5, rtol=1e-5)
    assert not loaded.cfg.tie_weights  # the adapted head is no longer the embedding


# --- 2. RMSNorm ----------------------------------------------------------------------------------
def test_rmsnorm_float64_equals_torch_and_passes_gradcheck():
    """float64 input was normalised in float32."""
    torch.manual_seed(0)
    ours = attnlib.RMSNorm(6, eps=1e-5).double()
    with torch.no_grad():
        ours.weight.copy_(torch.randn(6))
    ref = torch.nn.RMSNorm(6, eps=1e-5).double()
    ref.load_state_dict(ours.state_dict())
    x = torch.randn(3, 4, 6, dtype=torch.float64, requires_grad=True)
    torch.testing.assert_close(ours(x), ref(x), rtol=1e-13, atol=1e-13)
    assert torch.autograd.gradcheck(ours, (x,))


@pytest.mark.parametrize("scale", [1e20, 1e30, 3e38])
def test_rmsnorm_of_large_float32_inputs_is_right(scale):
    """x^2 overflowed: 0 (or NaN) where x / RMS(x) is of order 1."""
    x = torch.tensor([[1.0, -0.5, 0.25, 1.0], [0.1, 0.2, -0.3, 0.4]]) * scale
    want = (x.double() / x.double().pow(2).mean(-1, keepdim=True).sqrt()).float()
    got = attnlib.RMSNorm(4)(x)
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, want)
    half = attnlib.RMSNorm(4).to(torch.bfloat16)(x.to(torch.bfloat16))  # bf16 reaches 3e38 too
    torch.testing.assert_close(half.float(), want, atol=0.02, rtol=0.02)


# --- 3. GGUF metadata ----------------------------------------------------------------------------
LLAMA_META = {"llama.block_count": 1, "llama.context_length": 32, "llama.embedding_length": 8,
              "llama.feed_forward_length": 16, "llama.attention.head_count": 2,
              "llama.attention.head_count_kv": 1, "llama.attention.layer_norm_rms_epsilon": 1e-5,
              "llama.vocab_size": 5}


def write_gguf(path, **changes):
    """A Llama GGUF file with only metadata (no tensors); a change of None drops the key."""
    gguf = pytest.importorskip("gguf")
    meta = {**LLAMA_META, **{k.replace("__", "."): v for k, v in changes.items()}}
    writer = gguf.GGUFWriter(str(path), "llama")
    for key, value in meta.items():
        if value is not None:
            (writer.add_float32 if isinstance(value, float) else writer.add_uint32)(key, value)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.mark.parametrize("key", ["llama.attention.head_count", "llama.embedding_length",
                                 "llama.block_count", "llama.attention.layer_norm_rms_epsilon"])
def test_gguf_missing_metadata_key_is_named(tmp_path, key):
    """A bare KeyError (or a TypeError from None // heads) from deep inside."""
    path = write_gguf(tmp_path / "incomplete.gguf", **{key.replace(".", "__"): None})
    with pytest.raises(ValueError, match=f"incomplete.gguf.*'{key}'") as err:
        attnlib.pretrained.read_llama_gguf(path)
    assert isinstance(err.value, KeyError)  # a missing key is also a KeyError (DESIGN)


@pytest.mark.parametrize("key, value", [("llama.attention.head_count", 0),
                                        ("llama.attention.head_count", 3),
                                        ("llama.attention.head_count_kv", 0),
                                        ("llama.block_count", 0)])
def test_gguf_impossible_sizes_are_named(tmp_path, key, value):
    """0 heads was a ZeroDivisionError."""
    path = write_gguf(tmp_path / "bad.gguf", **{key.replace(".", "__"): value})
    with pytest.raises(ValueError, match=f"bad.gguf.*'{key}'"):
        attnlib.pretrained.read_llama_gguf(path)


def test_gguf_without_vocabulary_size_is_named(tmp_path):
    path = write_gguf(tmp_path / "novocab.gguf", llama__vocab_size=None)
    with pytest.raises(ValueError, match="novocab.gguf.*'llama.vocab_size'"):
        attnlib.pretrained.read_llama_gguf(path)
    config, state, _ = attnlib.pretrained.read_llama_gguf(write_gguf(tmp_path / "ok.gguf"))
    assert config["num_attention_heads"] == 2 and config["head_dim"] == 4 and state == {}


# --- 4. GGUFTokenizer.decode ---------------------------------------------------------------------
def small_gguf_tokenizer():
    pytest.importorskip("tokenizers")
    meta = {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": ["a", "b", "ab"],
            "tokenizer.ggml.merges": ["a b"]}
    return attnlib.GGUFTokenizer(meta)


@pytest.mark.parametrize("rows", [torch.tensor([[0, 1], [1, 0]]), np.array([[0, 1], [1, 0]])])
def test_gguf_decode_refuses_a_batch_of_rows(rows):
    """Two rows were joined into one text."""
    tok = small_gguf_tokenizer()
    with pytest.raises(ValueError, match=r"one sequence \(T,\).*decode each row"):
        tok.decode(rows)
    assert [tok.decode(r) for r in rows] == ["ab", "ba"]
    assert tok.decode(torch.tensor([[2, 0]])) == "aba"  # generate's (1, T) is one sequence


# --- 5. the tiny GPT's file ----------------------------------------------------------------------
def test_load_tiny_gpt_keeps_the_files_vocabulary_order(tmp_path):
    """A vocabulary stored out of sorted order was re-sorted: ids read as other characters."""
    model = gpt()
    tok = attnlib.CharTokenizer("abcdefghijk")
    order = list("kjihgfedcba")  # the order the model was trained with
    tok.itos, tok.stoi = order, {c: i for i, c in enumerate(order)}
    path = attnlib.save_tiny_gpt(model, tok, tmp_path / "t.safetensors")
    loaded, tok2 = attnlib.load_tiny_gpt(path)
    assert tok2.itos == order and tok2.encode("ka") == [0, 10] and tok2.decode([0, 10]) == "ka"
    with torch.no_grad():
        ids = torch.tensor([tok.encode("kab")])
        assert torch.equal(loaded(torch.tensor([tok2.encode("kab")])).logits, model(ids).logits)


def test_load_tiny_gpt_refuses_a_repeated_character(tmp_path):
    from safetensors import safe_open
    from safetensors.torch import save_file

    tok = attnlib.CharTokenizer("abcdefghijk")
    path = attnlib.save_tiny_gpt(gpt(), tok, tmp_path / "t.safetensors")
    with safe_open(str(path), framework="pt") as f:
        meta, state = f.metadata(), {k: f.get_tensor(k) for k in f.keys()}
    meta["vocab"] = '["a", "a", "c", "d", "e", "f", "g", "h", "i", "j", "k"]'
    save_file(state, str(path), metadata=meta)
    with pytest.raises(ValueError, match="distinct characters"):
        attnlib.load_tiny_gpt(path)


def test_save_tiny_gpt_names_a_lone_surrogate(tmp_path):
    """A bare UnicodeEncodeError from safetensors."""
    tok = attnlib.CharTokenizer("abcdefghij\udc80")
    with pytest.raises(ValueError, match="tokenizer.*lone surrogate '\\\\udc80'"):
        attnlib.save_tiny_gpt(gpt(), tok, tmp_path / "t.safetensors")
    with pytest.raises(ValueError, match="extra.*lone surrogate"):
        attnlib.save_tiny_gpt(gpt(), attnlib.CharTokenizer("abcdefghijk"),
                              tmp_path / "t.safetensors", extra={"note": "\ud800"})


# --- 6. quantizing the largest float32 weights ---------------------------------------------------
HUGE = torch.tensor([[3e38, -3e38, 1.0, -2.0, 0.0, 3e38, -1e38, 2e38] * 8])  # (1, 64)
F32_MAX = torch.finfo(torch.float32).max


@pytest.mark.parametrize("scheme, kw, step", [
    ("int8", {}, 3e38 / 127), ("rows", {"bits": 4}, 3e38 / 7),
    ("groupwise", {"bits": 4, "block": 32}, 6e38 / 15),
    ("groupwise", {"bits": 2, "block": 64}, 6e38 / 3), ("nf4", {"block": 64}, 3e38 * 0.2)])
def test_quantizing_pm_3e38_is_finite_and_right(scheme, kw, step):
    """Group-wise: max - min overflowed, NaN codes and weights, silently; per row at float32's
    largest weight, a scale rounded up made top * scale inf. (NF4 was right in float32.)"""
    for w in (HUGE, HUGE.clamp(-F32_MAX, F32_MAX).sign() * F32_MAX):
        back = quant.round_trip(w, scheme, **kw)
        assert torch.isfinite(back).all(), scheme
        assert ((back.double() - w.double()).abs() <= step).all(), scheme


def test_quantize_linears_of_huge_weights_is_finite():
    layer = nn.Linear(64, 1, bias=False)
    with torch.no_grad():
        layer.weight.copy_(HUGE)
    model = quant.quantize_linears(nn.Sequential(layer), lambda w: quant.round_trip(w, "groupwise"))
    assert torch.isfinite(model[0].weight).all()
    q, d, m = quant.quantize_groupwise(HUGE, 4, 32)
    assert q.dtype == torch.uint8 and torch.isfinite(d).all() and torch.isfinite(m).all()


def test_weights_that_float32_or_float16_cannot_hold_are_refused():
    with pytest.raises(ValueError, match="w holds .* past float32's range"):
        quant.quantize_rows(torch.tensor([[1e300, 1.0]], dtype=torch.float64))
    with pytest.raises(ValueError, match="half_params=True.*float16"):
        quant.quantize_groupwise(torch.tensor([[1e6, 0.0] * 16]), 4, 32, half_params=True)
    with pytest.raises(ValueError, match="bits >= 2"):
        quant.quantize_groupwise(HUGE, 1, 32)
    q, d, m = quant.quantize_groupwise(torch.tensor([[1e6, 0.0] * 16]), 4, 32)
    with pytest.raises(ValueError, match="Q4_1 keeps scale and minimum in float16"):
        quant.pack_q4_1(q, d, m)


# --- 7. train ------------------------------------------------------------------------------------
def test_train_refuses_an_encoder_clearly():
    """An AttributeError ('NoneType' object has no attribute 'shape')."""
    torch.manual_seed(0)
    enc = attnlib.Encoder(TransformerConfig(**SMALL))
    with pytest.raises(TypeError, match="next-token model.*GPT.*Encoder returns hidden states"):
        attnlib.train(enc, torch.arange(40) % 11, steps=1, batch_size=2, block_size=4)


def test_train_refuses_data_of_the_other_kind():
    pairs = (torch.randint(0, 11, (6, 5)), torch.randint(0, 11, (6, 4)))
    with pytest.raises(TypeError, match=r"\(src, tgt\) pairs.*GPT"):
        attnlib.train(gpt(), pairs, steps=1, batch_size=2, bos_id=1)
    torch.manual_seed(0)
    s2s = attnlib.EncoderDecoder(TransformerConfig(**SMALL))
    with pytest.raises(TypeError, match="one sequence of ids per row.*EncoderDecoder"):
        attnlib.train(s2s, torch.arange(40) % 11, steps=1, batch_size=2, block_size=4)


@pytest.mark.parametrize("bos", [np.int64(1), torch.tensor(1)])
def test_train_takes_a_numpy_or_tensor_bos_id(bos):
    """Passed train's check, then a TypeError from teacher_forcing."""
    torch.manual_seed(0)
    s2s = attnlib.EncoderDecoder(TransformerConfig(**SMALL))
    pairs = (torch.randint(0, 11, (6, 5)), torch.randint(0, 11, (6, 4)))
    losses = attnlib.train(s2s, pairs, steps=2, batch_size=2, bos_id=bos, pad_id=np.int64(0))
    assert len(losses) == 2
    torch.manual_seed(0)
    again = attnlib.EncoderDecoder(TransformerConfig(**SMALL))
    assert attnlib.train(again, pairs, steps=2, batch_size=2, bos_id=1, pad_id=0) == losses
    decoder_input, _ = teacher_forcing(torch.tensor([[3, 4]]), bos)
    assert decoder_input.tolist() == [[1, 3]]


def test_train_many_refuses_models_that_share_parameters():
    """Two threads trained one parameter at once."""
    a, b, c = gpt(), gpt(), gpt()
    b.layers[1] = a.layers[1]  # the same module inside two models
    with pytest.raises(ValueError, match=r"models\[1\] and models\[3\] share parameters"):
        attnlib.train_many([c, a, gpt(), b], torch.arange(40) % 11, seeds=[0, 1, 2, 3], steps=1,
                           batch_size=2, block_size=4)
    tied = gpt()
    tied.embed.tok_emb.weight = c.embed.tok_emb.weight  # tied by hand
    with pytest.raises(ValueError, match=r"models\[0\] and models\[1\] share parameters.*tok_emb"):
        attnlib.train_many([c, tied], torch.arange(40) % 11, seeds=[0, 1], steps=1, batch_size=2,
                           block_size=4)
    frozen = gpt()  # a shared module that neither trains is only read: fine
    other = gpt()
    other.layers[0] = frozen.layers[0]
    frozen.layers[0].requires_grad_(False)
    histories = attnlib.train_many([frozen, other], torch.arange(40) % 11, seeds=[0, 1], steps=1,
                                   batch_size=2, block_size=4)
    assert len(histories) == 2


# --- 8. constructors and colour maps -------------------------------------------------------------
@pytest.mark.parametrize("cls", [attnlib.GPT, attnlib.Encoder, attnlib.EncoderDecoder])
def test_models_refuse_a_missing_config(cls):
    """Encoder(None) was an AttributeError."""
    with pytest.raises(TypeError, match="cfg must be an attnlib.TransformerConfig, got NoneType"):
        cls(None)


W3 = torch.softmax(torch.randn(3, 3, generator=torch.Generator().manual_seed(0)), -1)


def _live(cmap):
    tok = attnlib.CharTokenizer("abcdefghijk")
    return attnlib.viz.live_model(gpt(), tok, prompt="abc", cmap=cmap, lab=False)


@pytest.mark.parametrize("make", [lambda c: attnlib.viz.heatmap(W3, ["a", "b", "c"], cmap=c),
                                  lambda c: attnlib.viz.explorer(W3, ["a", "b", "c"], cmap=c),
                                  _live])
def test_an_unknown_colormap_names_the_argument(make):
    import matplotlib.pyplot as plt

    figures = plt.get_fignums()
    with pytest.raises(ValueError, match="cmap='nope'"):
        make("nope")
    with pytest.raises(TypeError, match="cmap=3"):
        make(3)
    with pytest.raises(ValueError, match="cmap=''"):
        make("")  # not silently the default
    assert plt.get_fignums() == figures  # refused before a figure was opened


# --- Attention, caches and sampling: the core's cases --------------------------------------------
@pytest.mark.parametrize("backend", ["math", "sdpa"])
@pytest.mark.parametrize("bias", [-1e5, torch.finfo(torch.float32).min])
def test_fp16_queries_with_a_row_of_large_finite_biases_keep_the_real_attention(backend, bias):
    """The row is not masked (its biases are finite): softmax ignores a constant per row."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 3, 8, dtype=torch.float16) for _ in range(3))
    mask = torch.zeros(3, 3)
    mask[1] = bias  # every key of query 1 gets the same large negative bias
    out, _ = attnlib.scaled_dot_product_attention(q, k, v, attn_mask=mask, backend=backend)
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # PyTorch's
    torch.testing.assert_close(out.float(), want.float(), atol=2e-3, rtol=2e-3)
    assert out[:, :, 1].abs().sum() > 0  # zeros before the fix


@pytest.mark.parametrize("other", ["length", "batch"])
def test_cross_attention_with_a_cache_refuses_another_context(other):
    torch.manual_seed(0)
    mha = attnlib.MultiHeadAttention(8, 2).eval()
    layer = attnlib.DecoderLayer(8, 2, 16, cross_attention=True).eval()
    x, ctx = torch.randn(1, 1, 8), torch.randn(1, 5, 8)
    new_ctx = torch.randn(1, 4, 8) if other == "length" else torch.randn(2, 5, 8)
    new_x = x if other == "length" else x.expand(2, 1, 8)
    for call in (lambda c, x_, context: mha(x_, context, cache=c),
                 lambda c, x_, context: layer(x_, context, cache=c)):
        cache = attnlib.KVCache()
        with torch.no_grad():
            call(cache, x, ctx)
            call(cache, x, ctx)  # the same source again: fine
            with pytest.raises(ValueError, match="another source|batch"):
                call(cache, new_x, new_ctx)  # reused the first source silently before


def test_top_p_below_float32s_smallest_number_keeps_the_top_token():
    logits = torch.tensor([[0.5, 3.0, 1.0]])
    kept = attnlib.top_p_filter(logits, 1e-46)
    assert torch.isfinite(kept).tolist() == [[False, True, False]]
    g = torch.Generator().manual_seed(0)
    assert attnlib.sample_next(logits, top_p=1e-46, generator=g).item() == 1


@pytest.mark.parametrize("temperature", [1e300, float("inf")])
def test_top_k_one_is_greedy_at_any_temperature(temperature):
    logits = torch.tensor([[0.5, 3.0, 1.0, 2.9]]).expand(200, 4)
    g = torch.Generator().manual_seed(0)
    picks = attnlib.sample_next(logits, temperature=temperature, top_k=1, generator=g)
    assert set(picks.flatten().tolist()) == {1}  # uniform over the 4 tokens before the fix


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_vanishing_temperature_is_greedy(dtype):
    logits = torch.tensor([[0.5, 3.0, 1.0]], dtype=dtype)
    g = torch.Generator().manual_seed(0)
    assert attnlib.sample_next(logits, temperature=1e-310, generator=g).item() == 1
    model = gpt()
    ids = torch.tensor([[1, 2, 3]])
    torch.testing.assert_close(model.generate(ids, 5, temperature=1e-310, generator=g),
                               model.generate(ids, 5, temperature=0.0))


def test_sample_next_takes_logits_that_need_grad_and_refuses_meta():
    logits = torch.randn(2, 5, requires_grad=True)
    with warnings_as_errors():
        assert attnlib.sample_next(logits, temperature=0.0).shape == (2, 1)
        attnlib.sample_next(logits, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="meta device"):
        attnlib.sample_next(torch.zeros(2, 5, device="meta"))


def warnings_as_errors():
    import warnings

    class Ctx:
        def __enter__(self):
            self.w = warnings.catch_warnings()
            self.w.__enter__()
            warnings.simplefilter("error")

        def __exit__(self, *exc):
            self.w.__exit__(*exc)
    return Ctx()


@pytest.mark.parametrize("field,value,error", [("positional", "Rope", ValueError),
                                                ("norm_first", "no", TypeError),
                                                ("n_heads", 3, ValueError),
                                                ("activation", "silu", ValueError)])
def test_a_config_edited_after_construction_is_checked_when_a_model_is_built(field, value, error):
    for cls in (attnlib.GPT, attnlib.Encoder, attnlib.EncoderDecoder):
        cfg = TransformerConfig(**SMALL)
        setattr(cfg, field, value)
        with pytest.raises(error, match=field):
            cls(cfg)  # built a model with no positions, or a post-norm stack, before
