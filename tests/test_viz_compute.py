"""The computing outputs on the Python side (no browser): what each entry point ships, its checks of
bad input, deterministic ids with the "-2" suffix for a second copy, nothing that points off the page,
and the still pictures for hosts that run no scripts. The browser tests (test_viz_*_browser.py)
check what the pages compute."""
from __future__ import annotations

import json
import re

import pytest
import torch

import attnlib
from attnlib import viz
from attnlib.viz import mask as vmask
from attnlib.viz.vectors import first_numbers


def small_model():
    torch.manual_seed(0)
    tok = attnlib.CharTokenizer("ab c")
    return attnlib.GPT(attnlib.TransformerConfig(vocab_size=tok.vocab_size, d_model=8, n_heads=2, n_layers=2, max_len=12)), tok


def outputs():
    model, tok = small_model()
    with torch.no_grad():
        att = model(torch.tensor([[0, 1, 2]]), need_weights=True).attentions
    return [
        viz.vector_explorer([2.0, -1.0, 0.5], [[1.0, 3.0, 4.0]]),
        viz.mask_explorer(torch.eye(3), torch.eye(3), ["a", "b", "<PAD>"], pad="<PAD>"),
        viz.heads_grid(att, ["a", "b", " "]),
        viz.exercise("What is 1 + 1?", 2),
        viz.live_model(model, tok, prompt="ab", experiments=[{"sentence": "s", "text": "ba", "off": [(0, 1)]}]),
    ]


def test_no_url_no_cdn_and_ids_repeatable():
    for out in outputs():
        html = out.to_html()
        assert "http" not in html and "require(" not in html and "<link" not in html, type(out)
        again = out.to_html()
        first_id = re.search(r'id="([^"]+)"', html).group(1)
        second_id = re.search(r'id="([^"]+)"', again).group(1)
        assert second_id == first_id + "-2" or (second_id.startswith(first_id) and second_id != first_id), (first_id, second_id)
        assert out.to_html(full_page=True).startswith("<!DOCTYPE html>")


def test_vector_explorer_numbers_and_checks():
    ex = viz.vector_explorer([2.0, -1.0, 0.5], [[1.0, 3.0, 4.0]], query_token="q")
    n = first_numbers(ex)
    assert n["dot"][0] == 1.0 and f"{n['scaled'][0]:.3f}" == "0.577" and n["weight"][0] == 1.0
    assert "0.577" in ex.still and "Scripts do not run here" in ex.still
    assert repr(ex) == "VectorExplorer('', examples=1, d_k=3, keys=1)"
    ex2 = viz.vector_explorer([[1.0, 0.0], [0.0, 1.0]], [[[1.0, 0.0]], [[0.0, 1.0], [1.0, 1.0]]], [None, [[1, 2], [3, 4]]],
                              examples=["a", "b"])
    assert [len(e["K"]) for e in ex2.payload["examples"]] == [1, 2]
    assert ex2.payload["examples"][0]["V"] is None and ex2.payload["examples"][1]["V"] == [[1, 2], [3, 4]]
    assert ex2.payload["examples"][1]["keys"] == ["k0", "k1"]
    with pytest.raises(ValueError, match="same width"):
        viz.vector_explorer([1.0, 2.0], [[1.0, 2.0, 3.0]])
    with pytest.raises(ValueError, match="finite"):
        viz.vector_explorer([1.0, float("nan")], [[1.0, 2.0]])
    with pytest.raises(ValueError, match=r"from -1000 to 1000, got 1e\+308 in the keys"):
        viz.vector_explorer([1.0, 2.0], [[1e308, 2.0]])  # the page could not compute q . k
    assert viz.vector_explorer([-1000.0], [[1000.0]], [[-1000.0]]).payload["maxAbs"] == 1000
    with pytest.raises(ValueError, match="1 to 8 keys"):
        viz.vector_explorer([1.0], [[1.0]] * 9)
    with pytest.raises(ValueError, match="one value per key"):
        viz.vector_explorer([1.0], [[1.0], [2.0]], [[1.0]])
    with pytest.raises(ValueError, match="lists of 2"):
        viz.vector_explorer([1.0], [[1.0]], examples=["a", "b"])
    with pytest.raises(ValueError, match="digits"):
        viz.vector_explorer([1.0], [[1.0]], digits=9)
    with pytest.raises(TypeError, match="title"):
        viz.vector_explorer([1.0], [[1.0]], title=3)


def test_payload_numbers_are_rounded_to_six_decimals():
    ex = viz.vector_explorer(torch.tensor([1 / 3, 2 / 3], dtype=torch.float64), torch.eye(2))
    assert ex.payload["examples"][0]["q"] == [0.333333, 0.666667]


def test_mask_explorer_starting_weights_are_attnlibs():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(4, 3, generator=g), torch.randn(4, 3, generator=g)
    ex = viz.mask_explorer([q, q[:3]], [k, k[:3]], [["<PAD>", "a", "b", "c"], ["a", "b", "<PAD>"]], pad="<PAD>",
                           causal=[True, False], examples=["left", "right"])
    st = ex.payload["examples"][0]
    assert st["pad"] == [True, False, False, False] and st["causal"] is True
    w = vmask.weights(st)
    assert (w[0] == 0).all()                                   # <PAD> first, causal: nothing to attend to
    assert abs(w[1:].sum(-1) - 1).max() < 1e-12
    m = vmask.allowed(ex.payload["examples"][1])
    assert m.tolist() == [[True, True, False]] * 3
    assert "Queries with no key to attend to (weights zero): &lt;PAD&gt;." in ex.still
    assert "<PAD>" not in ex.still                             # token text is escaped
    with pytest.raises(ValueError, match="convention"):
        viz.mask_explorer(q, k, list("abcd"), convention="hf2")
    with pytest.raises(ValueError, match="up to 10"):
        viz.mask_explorer(torch.eye(11), torch.eye(11), list("abcdefghijk"))
    with pytest.raises(ValueError, match="pad has 2"):
        viz.mask_explorer(q, k, list("abcd"), pad=[True, False])
    with pytest.raises(TypeError, match="tokens"):
        viz.mask_explorer(q, k, "abcd")
    with pytest.raises(ValueError, match="both be"):
        viz.mask_explorer(q, k[:2], list("abcd"))


def test_heads_grid_payload_is_the_explorers():
    att = torch.softmax(torch.randn(2, 3, 4, 4, generator=torch.Generator().manual_seed(1)), -1)
    g = viz.heads_grid(att, list("abcd"), head=(1, 2), digits=2)
    ex = viz.attention_explorer(att, list("abcd"), digits=2)
    assert {k: v for k, v in g.payload.items() if k != "start"} == ex.payload and g.payload["start"] == [1, 2]
    assert 'class="attnlib-data"' in g.to_html()               # nbval's one-step tolerance reads it
    assert "all 6 heads" in g.still and "layer 1, head 2" in g.still
    with pytest.raises(ValueError, match="every layer and head"):
        viz.heads_grid(att[0], list("abcd"))
    with pytest.raises(ValueError, match="head must be"):
        viz.heads_grid(att, list("abcd"), head=(2, 0))


def test_exercise_payloads():
    e = viz.exercise("?", torch.tensor(0.5))
    assert e.payload["kind"] == "number" and e.payload["answer"] == 0.5 and e.payload["tolerance"] == 0.005
    assert viz.exercise("?", (3, 4)).payload == {**viz.exercise("?", [3, 4]).payload}
    c = viz.exercise("?", 1, choices=["x", "y"])
    assert c.payload["kind"] == "choice" and c.payload["answer"] == 1
    assert "<details>" in c.still and "<li>x</li>" in c.still
    assert 'class="attnlib-exercise attnlib-kit attnlib-exercise"' in c.to_html()
    with pytest.raises(ValueError, match="kind"):
        viz.exercise("?", 1, kind="essay")
    with pytest.raises(ValueError, match="tolerance"):
        viz.exercise("?", 1.0, tolerance=-1)


def test_live_model_lab_payload_and_experiment_checks():
    model, tok = small_model()
    live = viz.live_model(model, tok, prompt="ab", experiments=[
        {"sentence": "Try it.", "text": "ba c", "off": [(1, 0)], "show": (0, 1), "lens": -1, "step": ("weights", 1)}])
    p = live.payload
    assert p["lab"] is True and p["experiments"] == [{"sentence": "Try it.", "text": "ba c", "off": [[1, 0]], "show": [0, 1],
                                                      "lens": -1, "step": ["weights", 1]}]
    assert len(p["paletteDiv"]) == 6 * 256
    html = live.to_html()
    for asset in ("window.attnlibEngine", "window.attnlibKit", "window.attnlibLiveLab"):
        assert asset in html
    assert viz.live_model(model, tok, prompt="ab", lab=False).payload["lab"] is False
    bad = [({"text": "x"}, TypeError), ({"sentence": "s", "off": [(2, 0)]}, ValueError),
           ({"sentence": "s", "text": "zz"}, ValueError), ({"sentence": "s", "step": ("nope", 0)}, ValueError),
           ({"sentence": "s", "colour": 1}, ValueError), ({"sentence": "s", "lens": "last"}, TypeError)]
    for e, err in bad:
        with pytest.raises(err):
            viz.live_model(model, tok, prompt="ab", experiments=[e])


def test_json_payloads_are_safe_in_a_script():
    ex = viz.vector_explorer([1.0], [[1.0]], key_tokens=["</script><b>"], query_token="</script>")
    html = ex.to_html()
    payload = re.search(r'<script type="application/json" class="attnlib-payload">(.*?)</script>', html, re.S).group(1)
    assert "</script>" not in payload and json.loads(payload)["examples"][0]["keys"] == ["</script><b>"]
