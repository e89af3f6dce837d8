"""The live model's laboratory (viz.live_model's lab panels) in a real headless Chromium, against
PyTorch on the same (shipped, float16-rounded) weights:
  - heads switched off in the page (output zeroed before out_proj) equal the same ablation done in
    PyTorch with forward pre-hooks on out_proj: logits and every layer's attention, and the greedy
    continuation token for token;
  - the logit lens (norm_f + lm_head on the residual stream after the embedding and every layer)
    equals PyTorch's, with forward hooks capturing each layer's output, with and without ablation;
  - the step-through's numbers (embedding, norm1, q/k/v, attention weights, out_proj, residuals,
    norm3, the FFN, norm_f, logits) equal PyTorch's intermediates (hooks) at the chosen position;
  - the panels' controls: head toggles (aria-pressed), all heads on, guided experiments, the lens
    position and the followed token, previous/next step and the step list, keyboard, 390 px.

Screenshots go to artifacts/screenshots/lab_*.png (git-ignored).
"""
from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch

import attnlib
from attnlib import viz

pytestmark = pytest.mark.slow

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
from _browser import chromium_driver, require_browser  # noqa: E402
from _viz_pages import JS_LAYOUT, check_clean, open_page, shot, state, write_page  # noqa: E402

require_browser()

from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import Select  # noqa: E402

TOL = 1e-4  # JS (float64) against PyTorch (float32) on the same weights, as the live model's test
torch.set_num_threads(1)
MODEL, TOK = attnlib.load_tiny_gpt()
EXPERIMENTS = [
    {"sentence": "Switch off every head of layer 1.", "text": "And God said unto Moses", "off": [(0, h) for h in range(4)],
     "show": (1, 2)},
    {"sentence": "The lens at the last position.", "text": "In the beginning God created", "lens": -1},
    {"sentence": "Step through the attention of layer 2.", "text": "And the LORD", "step": ("weights", 1)},
]
LIVE = viz.live_model(MODEL, TOK, title="Tiny GPT", experiments=EXPERIMENTS)
REF = LIVE.reference_model()
L, H, C = MODEL.cfg.n_layers, MODEL.cfg.n_heads, MODEL.cfg.d_model
D = C // H
TEXTS = ["And God said", "In the beginning God created the heaven", "Z"]


def off_grid(off: list[tuple[int, int]]) -> list[list[int]]:
    return [[0 if (l, h) in off else 1 for h in range(H)] for l in range(L)]


@contextlib.contextmanager
def ablated(model, off):
    """PyTorch's ablation: each switched-off head's slice of out_proj's input set to zero."""
    hooks = []
    for l in range(L):
        heads = [h for (ll, h) in off if ll == l]
        if heads:
            cols = torch.tensor([h * D + d for h in heads for d in range(D)])
            hooks.append(model.layers[l].self_attn.out_proj.register_forward_pre_hook(
                lambda mod, args, cols=cols: (args[0].index_fill(-1, cols, 0.0),)))
    try:
        yield model
    finally:
        for hk in hooks:
            hk.remove()


@pytest.fixture(scope="module")
def driver():
    with chromium_driver("1000,1400") as d:
        yield d


@pytest.fixture()
def page(driver, tmp_path):
    open_page(driver, write_page(tmp_path / "lab.html", [LIVE]), 1000, 1400)
    roots = {k: driver.find_element(By.CSS_SELECTOR, f"div.attnlib-{k}") for k in ("live", "lab-heads", "lab-lens", "lab-steps")}
    yield driver, roots
    check_clean(driver)


def js(d, roots, method, *args):
    return d.execute_script(f"return arguments[0].attnlibLive.{method}.apply(null, arguments[1])", roots["live"], list(args))


def test_head_ablation_equals_pytorch_hooks(page):
    d, roots = page
    g = torch.Generator().manual_seed(0)
    cases = [[], [(0, 0)], [(1, 3)], [(0, h) for h in range(H)], [(0, 1), (1, 0), (1, 2)]]
    cases += [[(l, h) for l in range(L) for h in range(H) if torch.rand(1, generator=g) < 0.4] for _ in range(3)]
    moved = 0
    for off in cases:
        for text in TEXTS:
            ids = TOK.encode(text)
            out = js(d, roots, "forward", ids, off_grid(off))
            T = len(ids)
            att = np.array([[[row + [0.0] * (T - len(row)) for row in h] for h in layer] for layer in out["attentions"]])
            with torch.no_grad(), ablated(REF, off):
                ref = REF(torch.tensor([ids]), need_weights=True)
            want_att = torch.stack([a[0] for a in ref.attentions]).numpy()
            gap = max(np.abs(np.array(out["logits"]) - ref.logits[0].numpy()).max(), np.abs(att - want_att).max())
            assert gap <= TOL, (off, text, gap)
            if off:
                with torch.no_grad():
                    intact = REF(torch.tensor([ids])).logits[0].numpy()
                moved += np.abs(intact - ref.logits[0].numpy()).max() > 1e-2
    assert moved >= 10      # the ablations do change the model


def torch_greedy(model, ids, n, off):
    ids = list(ids)
    with torch.no_grad(), ablated(model, off):
        for _ in range(n):
            if len(ids) >= MODEL.cfg.max_len:
                break
            ids.append(int(model(torch.tensor([ids])).logits[0, -1].argmax()))
    return ids


def test_greedy_continuation_with_heads_off(page):
    d, roots = page
    for off in ([], [(0, 0), (0, 2)], [(1, h) for h in range(H)]):
        ids = TOK.encode("And God said")
        got = js(d, roots, "greedy", ids, 24, off_grid(off))
        assert ids + got == torch_greedy(REF, ids, 24, off), off


def lens_reference(model, ids, pos, off):
    """softmax(lm_head(norm_f(h))) for h = the embedding and every layer's output, at `pos`."""
    seen = []
    hooks = [model.embed.register_forward_hook(lambda m, a, out: seen.append(out))]
    hooks += [layer.register_forward_hook(lambda m, a, out: seen.append(out[0] if isinstance(out, tuple) else out))
              for layer in model.layers]
    try:
        with torch.no_grad(), ablated(model, off):
            final = model(torch.tensor([ids])).logits[0, pos]
            probs = [torch.softmax(model.lm_head(model.norm_f(h[0, pos])), -1) for h in seen]
    finally:
        for hk in hooks:
            hk.remove()
    torch.testing.assert_close(model.lm_head(model.norm_f(seen[-1][0, pos])), final)   # the last row is the output
    return torch.stack(probs).numpy()


def test_logit_lens_equals_pytorch(page):
    d, roots = page
    for off in ([], [(0, 1), (1, 1)]):
        for text in TEXTS[:2]:
            ids = TOK.encode(text)
            for pos in (0, len(ids) // 2, len(ids) - 1):
                got = np.array(js(d, roots, "lens", ids, pos, off_grid(off)))
                want = lens_reference(REF, ids, pos, off)
                assert got.shape == (L + 1, TOK.vocab_size)
                assert np.abs(got - want).max() <= TOL, (off, text, pos)
    # the layers really differ: the lens is not the output repeated
    assert np.abs(want[0] - want[-1]).max() > 0.1


def test_step_through_equals_pytorch(page):
    d, roots = page
    ids = TOK.encode("In the beginning God")
    pos = 9
    off = [(0, 2)]
    steps = js(d, roots, "trace", ids, pos, off_grid(off))
    caught = {}

    def keep(name):
        return lambda m, a, out: caught.__setitem__(name, (a[0] if not isinstance(a, torch.Tensor) else a, out))

    hooks = [REF.embed.register_forward_hook(keep("embed"))]
    for l, layer in enumerate(REF.layers):
        for name in ("norm1", "norm3"):
            hooks.append(getattr(layer, name).register_forward_hook(keep(f"{name}{l}")))
        a = layer.self_attn
        for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
            hooks.append(getattr(a, name).register_forward_hook(keep(f"{name}{l}")))
        hooks.append(layer.ffn.fc2.register_forward_hook(keep(f"fc2{l}")))
        hooks.append(layer.register_forward_hook(keep(f"layer{l}")))
    hooks.append(REF.norm_f.register_forward_hook(keep("normf")))
    try:
        with torch.no_grad(), ablated(REF, off):
            out = REF(torch.tensor([ids]), need_weights=True)
    finally:
        for hk in hooks:
            hk.remove()
    at = lambda t: t[0, pos].numpy()  # noqa: E731
    want = {("embed", -1): [at(caught["embed"][1])], ("normf", L): [at(caught["normf"][1])]}
    for l in range(L):
        q, k, v = (at(caught[f"{n}{l}"][1]) for n in ("q_proj", "k_proj", "v_proj"))
        resid_mid = at(caught[f"norm3{l}"][0][0] if isinstance(caught[f"norm3{l}"][0], tuple) else caught[f"norm3{l}"][0])
        want[("norm1", l)] = [at(caught[f"norm1{l}"][1])]
        want[("qkv", l)] = [q, k, v]
        want[("weights", l)] = [out.attentions[l][0, h, pos, : pos + 1].numpy() for h in range(H)]
        merged = caught[f"out_proj{l}"][0]
        merged = merged[0] if isinstance(merged, tuple) else merged
        want[("out", l)] = [at(merged), at(caught[f"out_proj{l}"][1])]
        want[("add1", l)] = [resid_mid]
        want[("norm3", l)] = [at(caught[f"norm3{l}"][1])]
        fc2_in = caught[f"fc2{l}"][0]
        want[("ffn1", l)] = [at(fc2_in[0] if isinstance(fc2_in, tuple) else fc2_in)]
        layer_out = caught[f"layer{l}"][1]
        want[("ffn2", l)] = [at(caught[f"fc2{l}"][1]), at(layer_out[0] if isinstance(layer_out, tuple) else layer_out)]
    want[("logits", L)] = [out.logits[0, pos].numpy()]
    seen = set()
    for st in steps:
        key = (st["key"], st["layer"])
        got = st.get("rows") and [np.array(r[1]) for r in st["rows"]] or st.get("weights") or [st["logits"]]
        ref = want[key]
        assert len(got) == len(ref), key
        for g_, r_ in zip(got, ref):
            assert np.abs(np.array(g_) - r_).max() <= TOL, key
        seen.add(key)
    assert seen == set(want)                                    # every step of the network, in order
    assert [s["key"] for s in steps][:4] == ["embed", "norm1", "qkv", "weights"] and steps[-1]["key"] == "logits"
    fns = " ".join(s["fn"] for s in steps)
    for name in ("GPT.embed", "norm1", "q_proj", "scaled_dot_product_attention", "out_proj", "norm3", "FeedForward.fc1",
                 "fc2", "GPT.norm_f", "GPT.lm_head"):
        assert name in fns, name
    assert np.abs(np.array(steps[3]["weights"][2])).max() > 0     # a head switched off still attends...
    assert not np.array([r for r in steps[4]["rows"][0][1][2 * D: 3 * D]]).any()  # ...but writes nothing


def heads_probs(d, root) -> np.ndarray:
    cells = root.find_elements(By.CSS_SELECTOR, "svg.attnlib-plot rect.attnlib-cell")
    return np.array([float(c.get_attribute("data-value")) for c in cells]).reshape(2, -1)


def test_head_switches_in_the_page(page):
    d, roots = page
    heads, live = roots["lab-heads"], roots["live"]
    ids = TOK.encode("And God said")
    button = heads.find_element(By.CSS_SELECTOR, "button.attnlib-lab-head[data-layer='0'][data-head='1']")
    assert button.get_attribute("aria-pressed") == "false" and "layer 0, head 1" in button.get_attribute("aria-label")
    before = heads_probs(d, heads)
    np.testing.assert_allclose(before[0], before[1])                     # nothing off: the same
    button.click()
    assert button.get_attribute("aria-pressed") == "true"
    assert state(heads)["off"] == "L0H1" and state(live)["off"] == "L0H1"
    assert "layer 0, head 1" in live.find_element(By.CSS_SELECTOR, ".attnlib-live-offnote").text
    with torch.no_grad(), ablated(REF, [(0, 1)]):
        p_off = torch.softmax(REF(torch.tensor([ids])).logits[0, -1], -1).numpy()
    with torch.no_grad():
        p_on = torch.softmax(REF(torch.tensor([ids])).logits[0, -1], -1).numpy()
    probs = heads_probs(d, heads)
    names = d.execute_script("return Array.from(arguments[0].querySelectorAll('svg.attnlib-plot text.attnlib-collabel'),"
                             " t => t.firstChild.nodeValue)", heads)
    cols = [TOK.stoi[{"\u2423": " ", "\u23ce": "\n"}.get(t, t)] for t in names]
    np.testing.assert_allclose(probs[0], np.round(p_on[cols], 4), atol=1.5e-4)
    np.testing.assert_allclose(probs[1], np.round(p_off[cols], 4), atol=1.5e-4)
    # the main view's bars are the ablated model's too
    bars = {int(b.get_attribute("data-token")): float(b.get_attribute("data-p"))
            for b in live.find_elements(By.CSS_SELECTOR, ".attnlib-bars .attnlib-bar")}
    temp = float(state(live)["temperature"])
    with torch.no_grad(), ablated(REF, [(0, 1)]):
        z = REF(torch.tensor([ids])).logits[0, -1] / temp
    top = torch.topk(z, 10).values[-1]
    q = torch.softmax(z.masked_fill(z < top, float("-inf")), -1).numpy()
    assert all(abs(p - q[i]) <= 2e-6 for i, p in bars.items()), bars   # sampled from the ablated model
    conts = heads.find_elements(By.CSS_SELECTOR, ".attnlib-lab-conttext")
    assert [int(x) for x in conts[0].get_attribute("data-ids").split(",")] == torch_greedy(REF, ids, 24, [])[len(ids):]
    assert [int(x) for x in conts[1].get_attribute("data-ids").split(",")] == torch_greedy(REF, ids, 24, [(0, 1)])[len(ids):]
    shot(d, "lab_heads_off")
    heads.find_element(By.CSS_SELECTOR, "button.attnlib-lab-allon").click()
    assert state(heads)["off"] == "none" and button.get_attribute("aria-pressed") == "false"
    # keyboard: Space on a focused head button
    other = heads.find_element(By.CSS_SELECTOR, "button.attnlib-lab-head[data-layer='1'][data-head='3']")
    d.execute_script("arguments[0].focus()", other)
    other.send_keys(Keys.SPACE)
    assert state(heads)["off"] == "L1H3"


def test_experiments_lens_and_steps_in_the_page(page):
    d, roots = page
    heads, lens, steps, live = roots["lab-heads"], roots["lab-lens"], roots["lab-steps"], roots["live"]
    tries = heads.find_elements(By.CSS_SELECTOR, "button.attnlib-lab-try")
    assert len(tries) == 3 and EXPERIMENTS[0]["sentence"] in tries[0].get_attribute("aria-label")
    tries[0].click()
    assert state(heads)["off"] == "L0H0,L0H1,L0H2,L0H3"
    assert (state(live)["layer"], state(live)["head"]) == ("1", "2")
    assert live.find_element(By.CSS_SELECTOR, "textarea").get_attribute("value") == "And God said unto Moses"
    tries[1].click()
    assert state(heads)["off"] == "none"
    ids = TOK.encode("In the beginning God created")
    assert state(lens)["pos"] == str(len(ids) - 1)
    want = lens_reference(REF, ids, len(ids) - 1, [])
    labels = [t.text for t in lens.find_elements(By.CSS_SELECTOR, "svg.attnlib-plot text.attnlib-celllabel")]
    tops = [[TOK.itos[i] for i in np.argsort(-p, kind="stable")[:5]] for p in want]
    shown = lambda t: {"\u2423": " ", "\u23ce": "\n"}.get(t, t)  # noqa: E731
    assert [shown(x) for x in labels] == [t for row in tops for t in row]
    values = [float(c.get_attribute("data-value")) for c in lens.find_elements(By.CSS_SELECTOR, "svg.attnlib-plot rect.attnlib-cell")]
    np.testing.assert_allclose(values, np.round(np.sort(want, -1)[:, ::-1][:, :5], 4).ravel(), atol=1.5e-4)
    rng = lens.find_element(By.CSS_SELECTOR, "input[type=range]")
    rng.send_keys(Keys.HOME)
    assert state(lens)["pos"] == "0"
    cell = lens.find_elements(By.CSS_SELECTOR, "svg.attnlib-plot rect.attnlib-cell")[6]
    ActionChains(d).move_to_element(cell).click().perform()
    assert state(lens)["token"] != "-1" and "\u2192" in lens.find_element(By.CSS_SELECTOR, ".attnlib-lab-note").text
    shot(d, "lab_lens")
    tries[2].click()
    assert state(steps)["key"] == "weights" and state(steps)["layer"] == "1"
    ids = TOK.encode("And the LORD")
    weights = [float(c.get_attribute("data-value")) for c in steps.find_elements(By.CSS_SELECTOR, "svg.attnlib-plot rect.attnlib-cell")]
    with torch.no_grad():
        w = REF(torch.tensor([ids]), need_weights=True).attentions[1][0, :, -1].numpy()   # (H, T)
    np.testing.assert_allclose(weights, np.round(w, 3).ravel(), atol=1.5e-3)
    nxt, prev = (steps.find_element(By.CSS_SELECTOR, f"button.attnlib-lab-{n}") for n in ("next", "prev"))
    before = int(state(steps)["step"])
    nxt.click()
    assert int(state(steps)["step"]) == before + 1 and state(steps)["key"] == "out"
    prev.click()
    sel = Select(steps.find_element(By.CSS_SELECTOR, "select"))
    sel.select_by_index(0)
    assert state(steps)["key"] == "embed" and not prev.is_enabled()
    sel.select_by_index(len(sel.options) - 1)
    assert state(steps)["key"] == "logits" and not nxt.is_enabled()
    assert "GPT.lm_head" in steps.find_element(By.CSS_SELECTOR, ".attnlib-lab-fn").text
    shot(d, "lab_steps")


def test_legible_at_390(driver, tmp_path):
    path = write_page(tmp_path / "phone.html", [LIVE])
    for width in (390, 1280):
        open_page(driver, path, width, 1400)
        for cls in ("live", "lab-heads", "lab-lens", "lab-steps"):
            root = driver.find_element(By.CSS_SELECTOR, f"div.attnlib-{cls}")
            lay = driver.execute_script(JS_LAYOUT, root)
            assert lay["smallest"] >= 10 and lay["pageOverflow"] <= 0 and lay["outside"] == [], (cls, width, lay)
        shot(driver, f"lab_{width}")
    check_clean(driver)
