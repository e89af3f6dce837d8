"""attnlib.viz: heatmap drawing, explorer payload (round trip, escaping, determinism, size), validation."""
from __future__ import annotations

import json
import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from attnlib import viz  # noqa: E402
from attnlib.viz.explorer import _asset  # noqa: E402

torch.set_num_threads(1)
EVIL = "<script>alert(1)</script>"


def softmax_weights(*shape: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(*shape, generator=g), dim=-1)


def payload_of(html: str) -> dict:
    m = re.search(r'<script type="application/json" class="attnlib-data">(.*?)</script>', html, re.S)
    assert m is not None, "no JSON payload script in the HTML"
    return json.loads(m.group(1))


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


# ----------------------------------------------------------------------------------- heatmap
def test_heatmap_labels_title_colorbar():
    w = softmax_weights(3, 4)
    ax = viz.heatmap(w, ["I", "like", "tea"], ["a", "b", "c", "d"], title="my title")
    assert ax.get_title() == "my title"
    assert [t.get_text() for t in ax.get_yticklabels()] == ["I", "like", "tea"]
    xt = ax.get_xticklabels()
    assert [t.get_text() for t in xt] == ["a", "b", "c", "d"]
    assert all(t.get_rotation() == 45 for t in xt)
    assert ax.get_xlabel() == "key" and ax.get_ylabel() == "query"
    cbar_axes = [a for a in ax.figure.axes if a is not ax]
    assert len(cbar_axes) == 1 and cbar_axes[0].get_ylabel() == "attention weight"
    image = ax.images[0]
    assert image.get_cmap().name.startswith("viridis")
    np.testing.assert_allclose(np.asarray(image.get_array()), w.numpy(), rtol=0, atol=1e-6)
    assert image.norm.vmin == 0.0 and image.norm.vmax == 1.0


def test_heatmap_annotations_are_the_numbers():
    w = softmax_weights(3, 3)
    ax = viz.heatmap(w, ["a", "b", "c"])
    texts = [t.get_text() for t in ax.texts]
    assert texts == [f"{v:.2f}" for v in w.flatten().tolist()]
    ax2 = viz.heatmap(softmax_weights(12, 12), list("abcdefghijkl"))
    assert ax2.texts == [] or len(ax2.texts) == 0  # too many cells: no annotations by default


def test_heatmap_masked_cells_do_not_crash_and_are_masked():
    scores = torch.randn(4, 4)
    scores = scores.masked_fill(~torch.ones(4, 4, dtype=torch.bool).tril(), float("-inf"))
    ax = viz.heatmap(scores, list("abcd"), vmin=None, vmax=None, colorbar_label="score")
    data = ax.images[0].get_array()
    assert np.array_equal(np.ma.getmaskarray(data), ~np.tri(4, dtype=bool))
    assert any(p.get_hatch() for p in ax.patches), "masked cells need a hatched background"
    assert "-\u221e" in [t.get_text() for t in ax.texts]


def test_heatmap_blocked_cells_are_hatched_and_keep_their_value():
    causal = torch.ones(3, 3, dtype=torch.bool).tril()
    w = torch.softmax(torch.randn(3, 3).masked_fill(~causal, float("-inf")), -1)
    ax = viz.heatmap(w, list("abc"), blocked=~causal)
    data = ax.images[0].get_array()
    assert np.array_equal(np.ma.getmaskarray(data), ~np.tri(3, dtype=bool))
    assert any(p.get_hatch() for p in ax.patches)
    texts = ax.texts
    assert [t.get_text() for t in texts] == [f"{v:.2f}" for v in w.flatten().tolist()]
    plated = [t.get_bbox_patch() is not None for t in texts]
    assert plated == (~causal).flatten().tolist()  # the value on a plate where hatched
    # without blocked= (the default), the same weights draw as before: nothing hatched
    plain = viz.heatmap(w, list("abc"))
    assert not np.ma.getmaskarray(plain.images[0].get_array()).any()
    assert all(t.get_bbox_patch() is None for t in plain.texts)


def test_heatmap_signed_data_gets_diverging_symmetric_scale():
    x = torch.tensor([[-2.0, 1.0], [0.5, 0.0]])
    ax = viz.heatmap(x, ["a", "b"], vmin=None, vmax=None)
    image = ax.images[0]
    assert image.get_cmap().name.startswith("RdBu")
    assert (image.norm.vmin, image.norm.vmax) == (-2.0, 2.0)


def test_heatmap_dollar_tokens_are_escaped_for_mathtext():
    ax = viz.heatmap(torch.eye(2), ["$5", "x"])
    ax.figure.canvas.draw()  # would raise on unbalanced mathtext
    assert ax.get_yticklabels()[0].get_text() == r"\$5"


def test_heatmap_validation():
    with pytest.raises(ValueError, match=r"2-D.*\(2, 3, 3\)"):
        viz.heatmap(torch.rand(2, 3, 3), list("abc"))
    with pytest.raises(ValueError, match=r"row_tokens has 2 tokens.*3 rows"):
        viz.heatmap(torch.rand(3, 3), ["a", "b"])
    with pytest.raises(ValueError, match=r"col_tokens has 3 tokens.*4 columns"):
        viz.heatmap(torch.rand(3, 4), list("abc"), list("abc"))
    with pytest.raises(TypeError, match="one string"):
        viz.heatmap(torch.rand(3, 3), "abc")


def test_heatmap_draws_into_given_axes():
    fig, axes = plt.subplots(1, 2)
    out = viz.heatmap(torch.eye(2), ["a", "b"], ax=axes[1], colorbar=False)
    assert out is axes[1] and len(axes[1].images) == 1 and len(axes[0].images) == 0


# ----------------------------------------------------------------------------------- explorer
def test_explorer_payload_round_trip_within_quantisation_step():
    x = softmax_weights(2, 3, 5, 5)
    for digits in (1, 3, 5):
        ex = viz.explorer(x, list("abcde"), digits=digits)
        back = viz.decode_payload(payload_of(ex._repr_html_()))
        assert back.shape == (2, 3, 5, 5)
        assert np.abs(back - x.double().numpy()).max() <= 0.5 * 10.0 ** -digits + 1e-12


def test_explorer_signed_and_masked_values_round_trip():
    x = torch.randn(2, 4, 4) * 30
    x[0, 0, 1] = float("-inf")
    x[1, 2, 3] = float("nan")
    x[1, 3, 0] = float("inf")
    ex = viz.explorer(x, list("abcd"), dims=("head",), value_name="score", diverging=True)
    back = viz.decode_payload(ex.payload)
    assert back[0, 0, 1] == -np.inf and np.isnan(back[1, 2, 3]) and back[1, 3, 0] == np.inf
    finite = np.isfinite(x.numpy())
    assert np.abs(back[finite] - x.double().numpy()[finite]).max() <= 0.5e-3 + 1e-9
    assert ex.payload["vmin"] == -ex.payload["vmax"]  # diverging: centred on 0


def test_explorer_escapes_tokens_and_title():
    ex = viz.explorer(softmax_weights(1, 2, 2), [EVIL, "b"], title=EVIL, examples=None)
    html = ex._repr_html_()
    assert EVIL not in html and "<b>" not in html
    assert html.count("<script") == 2 and html.count("</script>") == 2  # payload + code, nothing injected
    p = payload_of(html)
    assert p["examples"][0]["rows"][0] == EVIL and p["title"] == EVIL  # shown as text, intact


def test_explorer_html_is_deterministic_and_content_addressed():
    a = viz.explorer(softmax_weights(2, 4, 4), list("abcd"))._repr_html_()
    b = viz.explorer(softmax_weights(2, 4, 4), list("abcd"))._repr_html_()
    c = viz.explorer(softmax_weights(2, 4, 4, seed=1), list("abcd"))._repr_html_()
    assert strip_copy_suffix(a) == strip_copy_suffix(b)  # the second copy's id gets "-2" (see below)
    ids = [re.search(r'id="(attnlib-explorer-[0-9a-f]+)"', h).group(1) for h in (a, c)]
    assert ids[0] != ids[1]


def test_explorer_is_self_contained():
    html = viz.explorer(softmax_weights(2, 3, 3), list("abc"))._repr_html_()
    assert html.startswith('<div class="attnlib-explorer"') and html.endswith("</div>")
    for banned in ("<link", " src=", "require(", "fetch(", "XMLHttpRequest", "import(", "cdn", "@import", "http", "//"):
        assert banned not in html, banned
    assert "<style>" in html and "svg.attnlib-plot" in html and "attnlib-tooltip" in html


def test_explorer_size_for_6_layers_12_heads_16_tokens():
    ex = viz.explorer(softmax_weights(6, 12, 16, 16), [f"t{i}" for i in range(16)])
    html = ex._repr_html_()
    data_bytes = len(ex.payload["examples"][0]["data"])
    assert ex.payload["examples"][0]["bytes"] == 2  # 3 digits of [0, 1] fit in uint16
    assert data_bytes == 4 * -(-6 * 12 * 16 * 16 * 2 // 3)  # base64 of 2 bytes per value
    # the DOM kit every output shares (kit.js) rides along, and a book page keeps one copy of it
    # (scripts/book_checks.py): the explorer's own bytes stay under 100 kB, the whole under 125
    kit = len(_asset("kit.js").encode("utf-8"))
    size = len(html.encode("utf-8"))
    assert size - kit < 100_000 and size < 125_000, (size, kit)


def test_explorer_reprs():
    ex = viz.explorer(softmax_weights(6, 12, 9, 9), [str(i) for i in range(9)])
    assert repr(ex) == "Explorer(layer=6, head=12, tokens=9)"
    bundle = ex._repr_mimebundle_()
    assert set(bundle) == {"text/html", "text/plain"} and bundle["text/plain"] == repr(ex)
    assert strip_copy_suffix(bundle["text/html"]) == strip_copy_suffix(ex._repr_html_())
    ex2 = viz.explorer(softmax_weights(3, 4), list("abc"), list("wxyz"), title="cross")
    assert repr(ex2) == "Explorer('cross', queries=3, keys=4)"


def test_explorer_examples_with_different_lengths():
    xs = [softmax_weights(2, 3, 3), softmax_weights(2, 5, 5, seed=1)]
    ex = viz.explorer(xs, [list("abc"), list("vwxyz")], dims=("head",), examples=["short", "long"])
    assert [e["name"] for e in ex.payload["examples"]] == ["short", "long"]
    for i, x in enumerate(xs):
        np.testing.assert_allclose(viz.decode_payload(ex.payload, i), x.numpy(), atol=5e-4 + 1e-9)
    assert repr(ex) == "Explorer(examples=2, head=2, tokens=3|5)"


def test_explorer_dim_labels_and_defaults():
    ex = viz.explorer(softmax_weights(2, 3, 2, 2), ["a", "b"], dim_labels={"head": ["h0", "h1", "h2"]})
    assert [d["name"] for d in ex.payload["dims"]] == ["layer", "head"]
    assert ex.payload["dims"][1]["labels"] == ["h0", "h1", "h2"]
    assert ex.payload["dims"][0]["labels"] == ["0", "1"]


def test_explorer_validation_names_sizes():
    x = softmax_weights(2, 3, 3)
    with pytest.raises(ValueError, match=r"row_tokens has 2 tokens.*3 rows"):
        viz.explorer(x, ["a", "b"])
    with pytest.raises(ValueError, match=r"dims names 2 axes.*1 leading"):
        viz.explorer(x, list("abc"), dims=("layer", "head"))
    with pytest.raises(ValueError, match=r"dim_labels\['head'\] has 3 labels.*has 2"):
        viz.explorer(x, list("abc"), dims=("head",), dim_labels={"head": ["a", "b", "c"]})
    with pytest.raises(ValueError, match="unknown dims"):
        viz.explorer(x, list("abc"), dims=("head",), dim_labels={"layer": ["a", "b"]})
    with pytest.raises(ValueError, match=r"examples has 1 names but data has 2"):
        viz.explorer([x, x], [list("abc")] * 2, examples=["one"])
    with pytest.raises(ValueError, match=r"same leading shape.*\(2,\).*\(3,\)"):
        viz.explorer([x, softmax_weights(3, 3, 3)], [list("abc")] * 2)
    with pytest.raises(ValueError, match="digits"):
        viz.explorer(x, list("abc"), digits=9)
    with pytest.raises(ValueError, match="vmin < vmax"):
        viz.explorer(x, list("abc"), vmin=1.0, vmax=0.0)
    with pytest.raises(ValueError, match=r"\(Tq, Tk\)|Tq, Tk"):
        viz.explorer(torch.rand(3), list("abc"))


# ----------------------------------------------------------------------------------- attention_explorer
def test_attention_explorer_from_model_style_list():
    torch.manual_seed(0)
    mha = torch.nn.ModuleList(
        [__import__("attnlib").MultiHeadAttention(8, 2) for _ in range(3)])
    x = torch.randn(2, 4, 8)
    atts = [m(x, need_weights=True)[1] for m in mha]  # per layer (B, H, T, T)
    ex = viz.attention_explorer(atts, list("abcd"), batch_index=1)
    assert [d["name"] for d in ex.payload["dims"]] == ["layer", "head"]
    expected = torch.stack([a[1] for a in atts]).detach().numpy()
    np.testing.assert_allclose(viz.decode_payload(ex.payload), expected, atol=5e-4 + 1e-9)


def test_attention_explorer_shapes_and_decode_step_alignment():
    ex = viz.attention_explorer(softmax_weights(4, 3, 3), list("abc"))
    assert [d["name"] for d in ex.payload["dims"]] == ["head"]
    step = viz.attention_explorer(softmax_weights(2, 4, 1, 5), list("abcde"))  # one new query, 5 keys
    assert step.payload["examples"][0]["rows"] == ["e"]
    assert step.payload["examples"][0]["cols"] == list("abcde")
    cross = viz.attention_explorer(softmax_weights(2, 3, 4), list("abc"), list("wxyz"))
    assert cross.payload["examples"][0]["cols"] == list("wxyz")


def test_attention_explorer_examples():
    ex = viz.attention_explorer([softmax_weights(2, 3, 3), softmax_weights(2, 4, 4)],
                                [list("abc"), list("wxyz")], examples=["a", "b"])
    assert [len(e["rows"]) for e in ex.payload["examples"]] == [3, 4]


def test_attention_explorer_validation():
    with pytest.raises(ValueError, match=r"3 queries x 4 keys but 2 tokens"):
        viz.attention_explorer(softmax_weights(2, 3, 4), ["a", "b"])
    with pytest.raises(ValueError, match=r"3 query rows but 2 query tokens"):
        viz.attention_explorer(softmax_weights(2, 3, 3), ["a", "b"], list("abc"))
    with pytest.raises(ValueError, match=r"4 key columns but 3 key tokens"):
        viz.attention_explorer(softmax_weights(2, 3, 4), list("abc"), list("abc"))
    with pytest.raises(ValueError, match=r"\(L, H, Tq, Tk\).*\(1, 2, 3, 3, 3\)"):
        viz.attention_explorer(torch.rand(1, 2, 3, 3, 3), list("abc"))
    with pytest.raises(ValueError, match="batch_index=5.*batch size 2"):
        viz.attention_explorer([softmax_weights(2, 1, 3, 3)], list("abc"), batch_index=5)
    with pytest.raises(ValueError, match="need_weights"):
        viz.attention_explorer([], list("abc"))


# ----------------------------------------------------------------------------------- precomputed_slider
def test_precomputed_slider_links_slider_to_stack_in_widget_state():
    from ipywidgets.embed import embed_data

    def render(k):
        ax = viz.heatmap(torch.eye(2) * k / 3, ["a", "b"], title=f"k={k}")
        return ax.figure

    box = viz.precomputed_slider([1, 2, 3], render, description="k")
    slider, stack = box.children
    assert slider._options_labels == ("1", "2", "3") and slider.description == "k"
    assert len(stack.children) == 3
    pngs = [out.outputs[0]["data"]["image/png"] for out in stack.children]
    assert len(set(pngs)) == 3  # a different picture per value
    assert plt.get_fignums() == []  # figures closed after rendering
    state = embed_data(views=[box])["manager_state"]["state"]
    links = [s["state"] for s in state.values() if s["model_name"] == "LinkModel"]
    pairs = {(lk["source"][0].replace("IPY_MODEL_", ""), lk["source"][1],
              lk["target"][0].replace("IPY_MODEL_", ""), lk["target"][1]) for lk in links}
    assert (slider.model_id, "index", stack.model_id, "selected_index") in pairs
    outputs_state = [state[o.model_id]["state"]["outputs"] for o in stack.children]
    assert all(o[0]["data"]["image/png"] for o in outputs_state)  # stored in the notebook's state


def test_precomputed_slider_collects_unreturned_figures_and_html():
    def draw(k):
        fig, ax = plt.subplots(figsize=(2, 2))
        viz.heatmap(torch.eye(2) * k, ["a", "b"], ax=ax, title=f"k={k}")  # returns nothing

    box = viz.precomputed_slider([0, 1], draw)
    assert [len(o.outputs) for o in box.children[1].children] == [1, 1]
    assert plt.get_fignums() == []
    ex = viz.explorer(softmax_weights(2, 2), ["a", "b"])
    box = viz.precomputed_slider(["x"], lambda _: ex)
    shown = box.children[1].children[0].outputs[0]["data"]["text/html"]
    assert strip_copy_suffix(shown) == strip_copy_suffix(ex._repr_html_())
    with pytest.raises(ValueError, match=r"render\(1\) returned None"):
        viz.precomputed_slider([1], lambda v: None)


def test_precomputed_slider_output_explains_itself_where_widgets_cannot_draw():
    """Untrusted JupyterLab / GitHub show text/plain or an image, never `VBox(children=...`."""
    box = viz.precomputed_slider([1, 2], lambda k: viz.heatmap(torch.eye(2) * k / 2, ["a", "b"]).figure,
                                 description="k")
    bundle = box._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle  # still a live widget where it can be
    assert "VBox(" not in bundle["text/plain"]
    assert "Slider 'k' over 2 precomputed states" in bundle["text/plain"] and "trusted" in bundle["text/plain"]
    first = box.children[1].children[0].outputs[0]["data"]["image/png"]
    assert bundle["image/png"] == first  # the first state's picture
    html = viz.precomputed_slider(["x"], lambda _: viz.explorer(softmax_weights(2, 2), ["a", "b"]))
    assert "image/png" not in html._repr_mimebundle_()  # no picture to show: the text alone


def test_precomputed_slider_validation():
    with pytest.raises(ValueError, match="at least one value"):
        viz.precomputed_slider([], str)
    with pytest.raises(TypeError, match="callable"):
        viz.precomputed_slider([1], "nope")
    with pytest.raises(ValueError, match="distinct"):
        viz.precomputed_slider([1, "1"], str)


def test_explorer_picks_the_narrowest_integer_width():
    w = softmax_weights(3, 3)
    assert viz.explorer(w, list("abc"), digits=2).payload["examples"][0]["bytes"] == 1
    assert viz.explorer(w, list("abc"), digits=3).payload["examples"][0]["bytes"] == 2
    wide = torch.randn(3, 3) * 1000
    ex = viz.explorer(wide, list("abc"), digits=3)
    assert ex.payload["examples"][0]["bytes"] == 4
    np.testing.assert_allclose(viz.decode_payload(ex.payload), wide.double().numpy(), atol=5e-4 + 1e-9)
    with pytest.raises(ValueError, match=r"needs more than 32 bits.*fewer digits"):
        viz.explorer(torch.tensor([[0.0, 1e7]]), ["q"], ["a", "b"], digits=3)


def test_explorer_save_writes_a_standalone_page(tmp_path):
    ex = viz.explorer(softmax_weights(2, 3, 3), list("abc"), title="t <1>")
    path = tmp_path / "ex.html"
    ex.save(path)
    page = path.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and ex._repr_html_() in page
    assert "<title>t &lt;1&gt;</title>" in page


# ---- issue 10 -----------------------------------------------------------------------------------

@pytest.mark.parametrize("kw", [dict(vmin=-np.inf), dict(vmax=np.inf), dict(vmin=np.nan), dict(vmax=float("nan"))])
def test_explorer_refuses_a_non_finite_colour_range(kw):
    """-inf used to reach the payload as -Infinity, which the browser's JSON.parse rejects."""
    with pytest.raises(ValueError, match=r"(vmin|vmax) must be a finite number"):
        viz.explorer(softmax_weights(2, 2), ["a", "b"], **kw)


def test_explorer_refuses_values_the_payload_cannot_hold():
    with pytest.raises(ValueError, match=r"1e\+17.*cannot be held exactly.*digits"):
        viz.explorer(np.full((2, 2), 1e17), ["a", "b"])  # decoded as -9.2e15 before (int64 overflow)
    with pytest.raises(ValueError, match=r"cannot be held exactly"):
        viz.explorer(np.full((2, 2), 1e13), ["a", "b"], digits=3)  # 1e16 > 2**53 units
    big = np.array([[1e12, 1e12 + 0.5], [np.inf, 1e12 - 2]])
    ex = viz.explorer(big, ["a", "b"], digits=3, diverging=True)  # 1e15 units: still exact
    np.testing.assert_array_equal(viz.decode_payload(ex.payload), big)
    assert "Infinity" not in ex._json and "NaN" not in ex._json  # what JSON.parse reads


def strip_copy_suffix(html: str) -> str:
    return re.sub(r'id="(attnlib-explorer-[0-9a-f]+)-\d+"', r'id="\1"', html)


def test_same_explorer_twice_on_a_page_gets_distinct_but_deterministic_ids():
    ex = viz.explorer(softmax_weights(2, 3, 3), list("abc"), title="shown twice (issue 10)")
    first, second, third = ex._repr_html_(), ex._repr_mimebundle_()["text/html"], ex._repr_html_()
    ids = [re.search(r'<div class="attnlib-explorer" id="([^"]+)"', h).group(1) for h in (first, second, third)]
    base = f"attnlib-explorer-{ex.uid}"
    assert ids == [base, base + "-2", base + "-3"]  # the first display is the HTML it always was
    assert strip_copy_suffix(second) == strip_copy_suffix(third) == first
    assert f'id="{base}"' in ex.to_html(full_page=True)  # a standalone page holds one copy: no suffix


def test_heatmap_colour_range_and_empty_input_agree_with_explorer():
    with pytest.raises(ValueError, match=r"vmin < vmax, got vmin=2.0, vmax=1.0"):
        viz.heatmap(np.eye(2), vmin=2, vmax=1)  # used to draw [2, 3] quietly
    with pytest.raises(ValueError, match=r"vmin < vmax, got vmin=2.0, vmax=1.0"):
        viz.explorer(np.eye(2), vmin=2, vmax=1)
    with pytest.raises(ValueError, match=r"vmax must be a finite number"):
        viz.heatmap(np.eye(2), vmax=np.inf)
    for shape in [(0, 0), (0, 3), (2, 0)]:
        with pytest.raises(ValueError, match=r"empty axis"):
            viz.heatmap(np.zeros(shape))
        with pytest.raises(ValueError, match=r"empty axis"):
            viz.explorer(np.zeros(shape))
    ax = viz.heatmap(np.full((2, 2), 0.5), vmin=None, vmax=None)  # a constant matrix still draws
    plt.close(ax.figure)


# ------------------------------------------------------------------- still picture (no scripts)
def test_explorer_carries_a_still_picture_of_its_first_state():
    """Where scripts do not run (GitHub, nbviewer, an untrusted notebook) the fallback shows the
    first state as SVG: one rect per cell, coloured by that state's values, labels escaped."""
    data = softmax_weights(2, 3, 4, 4)  # (layer, head, Tq, Tk)
    tokens = ["a", "<b>", "c", "d"]
    ex = viz.explorer(data, tokens, dims=("layer", "head"), title="still")
    html = ex.to_html()
    still = re.search(r'<div class="attnlib-noscript">(.*?)</div>', html, re.S).group(1)
    assert "first state (layer 0, head 0)" in still
    svg = re.search(r'<svg class="attnlib-static".*?</svg>', still, re.S).group(0)
    fills = re.findall(r'<rect [^>]*fill="#([0-9a-f]{6})"', svg)
    Tq, Tk = np.asarray(data).shape[-2:]
    assert len(fills) == Tq * Tk
    first = viz.decode_payload(ex.payload, 0)[0, 0]  # what the picture must show
    pal = ex.payload["palette"]
    lo, hi = ex.payload["vmin"], ex.payload["vmax"]
    want = [pal[6 * k:6 * k + 6] for k in
            np.minimum(255, np.floor((first.ravel() - lo) / (hi - lo) * 256)).astype(int)]
    assert fills == want
    assert "&lt;b&gt;" in svg and "<b>" not in svg  # token text escaped



def test_vector_explorer_still_has_one_score_column_when_not_scaled():
    """Unscaled, q.k and the "scaled" score are the same numbers: the still table shows them
    once (chapter 3), and scaled it shows both (chapter 4)."""
    q, K = [2.0, 0.5], [[2.0, 0.2], [0.2, 2.0]]
    for scale, heads in ((False, ["key", "k", "q\u00b7k (not scaled)", "weight"]),
                         (True, ["key", "k", "q\u00b7k", "\u00f7\u221a2", "weight"])):
        html = viz.vector_explorer(q, K, key_tokens=["a", "b"], scale=scale).to_html()
        still = re.search(r'<div class="attnlib-noscript">(.*?)</div>', html, re.S).group(1)
        assert re.findall(r"<th>(.*?)</th>", still) == heads, scale
        first = re.findall(r"<tr><td>a</td>(.*?)</tr>", still)[0]
        assert re.findall(r"<td>(.*?)</td>", first)[1] == "4.100"  # q . k_a
        assert len(re.findall(r"<td>", first)) == len(heads) - 1

def test_explorer_still_picture_is_left_out_when_too_large():
    from attnlib.viz._static import MAX_CELLS

    n = int(MAX_CELLS ** 0.5) + 1
    big = viz.explorer(softmax_weights(n, n), [f"t{i}" for i in range(n)])
    html = big.to_html()
    assert 'class="attnlib-static"' not in html and "too large to draw" in html
def test_precomputed_slider_opens_on_the_value_asked_for():
    box = viz.precomputed_slider([1, 10, 100], lambda k: f"k={k}", value=10)
    slider, stack = box.children
    assert slider.index == 1 and stack.selected_index == 1
    assert slider.value == 1  # the option's value is the index into the stack
    assert "the state 10 is shown" in box._repr_mimebundle_()["text/plain"]
    fig_box = viz.precomputed_slider(
        [1, 2], lambda k: viz.heatmap(torch.eye(2) * k / 2, ["a", "b"]).figure, value=2)
    pngs = [o.outputs[0]["data"]["image/png"] for o in fig_box.children[1].children]
    assert fig_box._repr_mimebundle_()["image/png"] == pngs[1] != pngs[0]
    assert viz.precomputed_slider([1, 2], str).children[0].index == 0  # default: the first
    with pytest.raises(ValueError, match=r"value=5 is not one of"):
        viz.precomputed_slider([1, 2], str, value=5)


# ------------------------------------------------------------------- initial state (issue 36)
def test_explorer_opens_on_the_initial_state_it_is_given():
    """initial={dim: label} picks the state an explorer opens on (chapter 9 opens at the end of
    training): the payload names one index per dim, the still picture shows that state, and an
    explorer without it keeps its payload and HTML exactly as before (no "initial" key, no third
    script), so the stored outputs of every other chapter stay valid."""
    data = softmax_weights(3, 2, 4, 4)  # (step, head, Tq, Tk)
    kw = dict(dims=("step", "head"), dim_labels={"step": [0, 50, 100]}, title="steps")
    plain = viz.explorer(data, list("abcd"), **kw)
    assert "initial" not in plain.payload
    same = viz.explorer(data, list("abcd"), initial=None, **kw)
    assert same.to_html(full_page=True) == plain.to_html(full_page=True)
    assert "attnlib-initial" not in plain.to_html() and plain.to_html().count("<script") == 2
    ex = viz.explorer(data, list("abcd"), initial={"step": 100}, **kw)
    assert ex.payload["initial"] == [2, 0]  # head not named: its first label
    html = ex.to_html()  # payload, explorer.js, then the script that moves the sliders there
    assert html.count("<script") == 3 and '<script class="attnlib-initial">' in html
    for banned in ("<link", " src=", "fetch(", "http", "//"):
        assert banned not in html.split('class="attnlib-initial">')[1], banned
    assert viz.explorer(data, list("abcd"), initial={"step": "100", "head": 1}, **kw).payload["initial"] == [2, 1]
    still = re.search(r'<div class="attnlib-noscript">(.*?)</div>', ex.to_html(), re.S).group(1)
    assert "opening state (step 100, head 0)" in still
    fills = re.findall(r'<rect [^>]*fill="#([0-9a-f]{6})"', still)
    last = viz.decode_payload(ex.payload, 0)[2, 0]
    lo, hi, pal = ex.payload["vmin"], ex.payload["vmax"], ex.payload["palette"]
    assert fills == [pal[6 * k:6 * k + 6] for k in
                     np.minimum(255, np.floor((last.ravel() - lo) / (hi - lo) * 256)).astype(int)]
    with pytest.raises(ValueError, match="unknown dims.*layer"):
        viz.explorer(data, list("abcd"), initial={"layer": 0}, **kw)
    with pytest.raises(ValueError, match="initial\\['step'\\] is '75'"):
        viz.explorer(data, list("abcd"), initial={"step": 75}, **kw)
    with pytest.raises(TypeError, match="initial must be a dict"):
        viz.explorer(data, list("abcd"), initial=[2, 0], **kw)


def test_explorer_axis_names_only_where_given():
    """axis_names=(rows, columns) names what a matrix that is not attention holds (chapter 12's
    block pool); without it, or with the default names, the payload and HTML stay exactly as
    before, so every other stored explorer stays valid."""
    data = softmax_weights(2, 3, 4)  # (step, rows, columns)
    plain = viz.explorer(data, list("abc"), list("wxyz"), dims=("step",))
    assert "axes" not in plain.payload
    same = viz.explorer(data, list("abc"), list("wxyz"), dims=("step",),
                        axis_names=("query", "key"))
    assert same.to_html(full_page=True) == plain.to_html(full_page=True)
    named = viz.explorer(data, list("abc"), list("wxyz"), dims=("step",),
                         axis_names=("blocks", "offset"))
    assert named.payload["axes"] == ["blocks", "offset"]
    assert "blocks=3, offset=4" in repr(named) and "queries=3, keys=4" in repr(plain)
    for bad in (("blocks",), ("blocks", ""), ("a", "b", "c")):
        with pytest.raises(ValueError, match="axis_names must be two non-empty names"):
            viz.explorer(data, list("abc"), list("wxyz"), dims=("step",), axis_names=bad)
