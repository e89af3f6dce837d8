"""The page's attention engine (attnlib/viz/engine.js) in a real headless Chromium, held equal to
attnlib on random cases: scaled_dot_product_attention (shapes, scales, bool / float / per-key /
causal masks, fully masked rows), MultiHeadAttention (self- and cross-attention, grouped-query,
is_causal with and without a mask, a head switched off = its slice zeroed before out_proj),
split/merge, causal_mask / padding_mask, and the four mask conventions of chapter 5 (attnlib.masks).

Everything is compared in float64, where the engine and attnlib should agree to rounding (1e-12).
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

import attnlib
from attnlib import masks
from attnlib.viz.explorer import _asset

pytestmark = pytest.mark.slow

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
from _browser import chromium_driver, require_browser  # noqa: E402

require_browser()
TOL = 1e-12
N_CASES = 120

# JS helpers of the test page: lists in, typed arrays for the engine, lists out. "-inf" travels
# as null (JSON has no -Infinity).
HARNESS = r"""
window.F = function (a) { return Float64Array.from(a.map(function (x) { return x === null ? -Infinity : x; })); };
window.L = function (a) { return Array.from(a).map(function (x) { return x === -Infinity ? null : x; }); };
window.mask = function (m) {
  if (!m) return null;
  var E = window.attnlibEngine;
  return m.kind === "bool" ? E.boolMask(Uint8Array.from(m.data), m.rows, m.cols) : E.floatMask(F(m.data), m.rows, m.cols);
};
window.lin = function (l) { return { w: F(l.w), b: l.b ? F(l.b) : null }; };
"""


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    page = tmp_path_factory.mktemp("engine") / "engine.html"
    page.write_text("<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>"
                    f"<script>{_asset('engine.js')}</script><script>{HARNESS}</script></body></html>",
                    encoding="utf-8")
    with chromium_driver() as d:
        d.get(page.as_uri())
        assert d.execute_script("return window.attnlibEngine.version") == 1
        yield d
        assert [e for e in d.get_log("browser") if e["level"] == "SEVERE"] == []


def flat(t: torch.Tensor) -> list:
    return [None if math.isinf(x) and x < 0 else x for x in t.reshape(-1).tolist()]


def random_mask(g: torch.Generator, Tq: int, Tk: int):
    """(kind, torch mask broadcastable to (Tq, Tk), payload for the page); some rows fully masked."""
    kind = ["none", "bool", "float", "per-key", "causal", "causal_mask"][int(torch.randint(6, (1,), generator=g))]
    if kind == "none":
        return kind, None, None
    if kind == "causal":
        return kind, "is_causal", None
    if kind == "causal_mask":
        m = attnlib.causal_mask(Tq, Tk)
        return kind, m, {"kind": "bool", "rows": Tq, "cols": Tk, "data": m.int().reshape(-1).tolist()}
    rows = 1 if kind == "per-key" else Tq
    allowed = torch.rand(rows, Tk, generator=g) > 0.35
    if rows > 1 and Tq > 1:
        allowed[int(torch.randint(Tq, (1,), generator=g))] = False  # a query with nothing to look at
    if kind == "float":
        m = torch.randn(rows, Tk, generator=g, dtype=torch.float64).masked_fill(~allowed, float("-inf"))
        return kind, m, {"kind": "float", "rows": rows, "cols": Tk, "data": flat(m)}
    return kind, allowed, {"kind": "bool", "rows": rows, "cols": Tk, "data": allowed.int().reshape(-1).tolist()}


def test_attention_equals_attnlib(driver):
    g = torch.Generator().manual_seed(0)
    cases, want = [], []
    seen = set()
    for _ in range(N_CASES):
        Tq, Tk, dk, dv = (int(x) for x in torch.randint(1, 8, (4,), generator=g))
        kind, m, payload = random_mask(g, Tq, Tk)
        if kind == "causal" and Tq != Tk:
            Tk = Tq
        q, k, v = (torch.randn(T, d, generator=g, dtype=torch.float64) * 2 for T, d in ((Tq, dk), (Tk, dk), (Tk, dv)))
        scale = None if torch.rand(1, generator=g) < 0.5 else float(torch.rand(1, generator=g)) * 2
        kw = {"is_causal": True} if m == "is_causal" else {"attn_mask": m}
        out, w = attnlib.scaled_dot_product_attention(q, k, v, scale=scale, need_weights=True, backend="math", **kw)
        fused, _ = attnlib.scaled_dot_product_attention(q, k, v, scale=scale, backend="sdpa", **kw)
        torch.testing.assert_close(out, fused)  # both of attnlib's paths: the same reference
        cases.append({"q": flat(q), "k": flat(k), "v": flat(v), "Tq": Tq, "Tk": Tk, "dk": dk, "dv": dv,
                      "mask": payload, "isCausal": m == "is_causal", "scale": scale})
        want.append((out, w))
        seen.add(kind)
    got = driver.execute_script("""
        var E = window.attnlibEngine;
        return arguments[0].map(function (c) {
          var r = E.attention(F(c.q), F(c.k), F(c.v), c.Tq, c.Tk, c.dk, c.dv,
                              {mask: mask(c.mask), isCausal: c.isCausal, scale: c.scale});
          return {out: L(r.out), w: L(r.weights), dead: r.dead};
        });""", cases)
    worst = 0.0
    n_dead = 0
    for c, (out, w), r in zip(cases, want, got):
        gap = max(np.abs(np.array(r["out"]) - out.numpy().ravel()).max(), np.abs(np.array(r["w"]) - w.numpy().ravel()).max())
        assert gap < TOL, (c, gap)
        worst = max(worst, gap)
        dead = (w.sum(-1) == 0).tolist()
        assert r["dead"] == dead                        # the engine says which rows had no key
        n_dead += sum(dead)
    assert seen == {"none", "bool", "float", "per-key", "causal", "causal_mask"}
    assert n_dead >= 20                                 # fully masked rows were tested, and are zeros
    print(f"\n{N_CASES} attention cases, {n_dead} fully masked rows; largest gap {worst:.1e}")


def test_attention_refuses_what_attnlib_refuses(driver):
    errors = driver.execute_script("""
        var E = window.attnlibEngine, q = F([1, 2]), out = [];
        function tryIt(f) { try { f(); out.push(null); } catch (e) { out.push(String(e.message)); } }
        tryIt(function () { E.attention(q, F([1, 2, 3, 4]), F([1, 2]), 1, 2, 2, 1, {isCausal: true}); });
        tryIt(function () { E.attention(q, q, q, 1, 1, 2, 2, {isCausal: true, mask: E.causalMask(1)}); });
        tryIt(function () { E.attention(q, q, q, 1, 1, 2, 2, {mask: E.boolMask(Uint8Array.from([1, 1]), 1, 2)}); });
        return out;""")
    assert "causalMask(Tq, Tk)" in errors[0] and "not both" in errors[1] and "does not broadcast" in errors[2]
    for bad in ({"is_causal": True}, {"is_causal": True, "attn_mask": attnlib.causal_mask(1)}):
        with pytest.raises(ValueError):
            k = torch.ones(2 if "attn_mask" not in bad else 1, 2)
            attnlib.scaled_dot_product_attention(torch.ones(1, 2), k, k, **bad)


def linear_payload(lin: torch.nn.Linear) -> dict:
    return {"w": flat(lin.weight.detach()), "b": flat(lin.bias.detach()) if lin.bias is not None else None}


def test_multi_head_attention_equals_attnlib(driver):
    g = torch.Generator().manual_seed(1)
    torch.manual_seed(1)
    cases, want, kinds = [], [], set()
    for n in range(60):
        H = int(torch.randint(1, 5, (1,), generator=g))
        D = int(torch.randint(1, 5, (1,), generator=g))
        G = [d for d in range(1, H + 1) if H % d == 0][int(torch.randint(0, H, (1,), generator=g)) % len([d for d in range(1, H + 1) if H % d == 0])]
        C, Tq = H * D, int(torch.randint(1, 7, (1,), generator=g))
        cross = n % 3 == 0
        Tk = int(torch.randint(1, 7, (1,), generator=g)) if cross else Tq
        mha = attnlib.MultiHeadAttention(C, H, n_kv_heads=G, bias=bool(n % 2)).double().eval()
        x = torch.randn(1, Tq, C, generator=g, dtype=torch.float64)
        ctx = torch.randn(1, Tk, C, generator=g, dtype=torch.float64) if cross else None
        kind, m, payload = random_mask(g, Tq, Tk)
        causal = kind == "causal" or (not cross and n % 4 == 1)  # is_causal, also with a mask
        if m == "is_causal":
            m = payload = None
        if cross:
            causal = False
        off = [int(h) for h in torch.randperm(H, generator=g)[: int(torch.randint(0, H, (1,), generator=g))]]
        # the reference for a head switched off: zero its slice of out_proj's input (a forward hook)
        hook = mha.out_proj.register_forward_pre_hook(
            lambda mod, args, off=off, D=D: (args[0].index_fill(-1, torch.tensor(
                [h * D + d for h in off for d in range(D)], dtype=torch.long), 0.0),) if off else None)
        with torch.no_grad():
            out, w = mha(x, ctx, attn_mask=m, is_causal=causal, need_weights=True, backend="math")
        hook.remove()
        head_mask = [0 if h in off else 1 for h in range(H)]
        cases.append({"x": flat(x), "ctx": flat(ctx) if cross else None, "Tq": Tq, "Tk": Tk, "mask": payload,
                      "isCausal": causal, "headMask": head_mask,
                      "p": {"C": C, "H": H, "G": G, **{s: linear_payload(getattr(mha, f"{s}_proj")) for s in ("q", "k", "v")},
                            "o": linear_payload(mha.out_proj)}})
        want.append((out[0], w[0]))
        kinds.add((cross, G < H, causal and m is not None, bool(off)))
    got = driver.execute_script("""
        var E = window.attnlibEngine;
        return arguments[0].map(function (c) {
          var p = {C: c.p.C, H: c.p.H, G: c.p.G, q: lin(c.p.q), k: lin(c.p.k), v: lin(c.p.v), o: lin(c.p.o)};
          var r = E.multiHeadAttention(F(c.x), c.Tq, c.ctx ? F(c.ctx) : null, c.Tk, p,
                                       {mask: mask(c.mask), isCausal: c.isCausal, headMask: c.headMask});
          return {out: L(r.out), w: L(r.weights)};
        });""", cases)
    worst = 0.0
    for c, (out, w), r in zip(cases, want, got):
        gap = max(np.abs(np.array(r["out"]) - out.numpy().ravel()).max(), np.abs(np.array(r["w"]) - w.numpy().ravel()).max())
        assert gap < TOL, (c["p"]["H"], c["p"]["G"], c["Tq"], c["Tk"], gap)
        worst = max(worst, gap)
    # self and cross, multi-head and grouped-query, is_causal AND a mask, heads switched off
    assert {k[0] for k in kinds} == {True, False} and {k[1] for k in kinds} == {True, False}
    assert any(k[2] for k in kinds) and any(k[3] for k in kinds)
    print(f"\n60 MultiHeadAttention cases; largest gap {worst:.1e}")


def test_switching_a_head_off_changes_only_what_it_writes(driver):
    """A head switched off still computes its weights; only its output slice is zero."""
    mha = attnlib.MultiHeadAttention(8, 2).double().eval()
    x = torch.randn(1, 4, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    p = {"C": 8, "H": 2, **{s: linear_payload(getattr(mha, f"{s}_proj")) for s in ("q", "k", "v")}, "o": linear_payload(mha.out_proj)}
    r = driver.execute_script("""
        var E = window.attnlibEngine, c = arguments[0];
        var p = {C: 8, H: 2, q: lin(c.q), k: lin(c.k), v: lin(c.v), o: lin(c.o)};
        var on = E.multiHeadAttention(F(arguments[1]), 4, null, 4, p, {isCausal: true});
        var off = E.multiHeadAttention(F(arguments[1]), 4, null, 4, p, {isCausal: true, headMask: [1, 0]});
        return {w_on: L(on.weights), w_off: L(off.weights), h_off: L(off.heads), h_on: L(on.heads), out_on: L(on.out), out_off: L(off.out)};
        """, p, flat(x))
    assert r["w_on"] == r["w_off"]
    h_on, h_off = np.array(r["h_on"]).reshape(2, 4, 4), np.array(r["h_off"]).reshape(2, 4, 4)
    assert np.array_equal(h_off[0], h_on[0]) and not h_off[1].any() and h_on[1].any()
    assert np.abs(np.array(r["out_on"]) - np.array(r["out_off"])).max() > 1e-3


def test_split_merge_and_masks_equal_attnlib(driver):
    g = torch.Generator().manual_seed(3)
    mha = attnlib.MultiHeadAttention(12, 3)
    x = torch.randn(1, 5, 12, generator=g, dtype=torch.float64)
    ids = torch.tensor([[3, 0, 5, 0, 0, 7]])
    r = driver.execute_script("""
        var E = window.attnlibEngine, x = F(arguments[0]);
        var s = E.splitHeads(x, 5, 3, 4);
        return {split: L(s), merged: L(E.mergeHeads(s, 3, 5, 4)),
                causal: [[3, 3], [2, 5], [5, 2], [1, 4]].map(function (t) { return Array.from(E.causalMask(t[0], t[1]).data); }),
                pad: Array.from(E.paddingMask(arguments[1], 0).data)};
        """, flat(x), ids[0].tolist())
    assert np.array_equal(np.array(r["split"]), mha.split_heads(x)[0].numpy().ravel())
    assert np.array_equal(np.array(r["merged"]), x.numpy().ravel())
    for (tq, tk), got in zip([(3, 3), (2, 5), (5, 2), (1, 4)], r["causal"]):
        assert got == attnlib.causal_mask(tq, tk).int().reshape(-1).tolist(), (tq, tk)
    assert r["pad"] == attnlib.padding_mask(ids, 0).int().reshape(-1).tolist()


def test_mask_conventions_equal_attnlib_masks(driver):
    """The page reads each convention as attnlib.masks does: nn.MultiheadAttention's bool (True =
    blocked), additive 0/-inf, HF's per-key 1/0 (with the model's causal part), SDPA's bool."""
    g = torch.Generator().manual_seed(4)
    cases, want = [], []
    for n in range(30):
        T = int(torch.randint(1, 7, (1,), generator=g))
        allowed = torch.rand(T, T, generator=g) > 0.4
        flags = (torch.rand(1, T, generator=g) > 0.3).long()
        causal = bool(n % 2)
        nn_form = masks.to_nn_mha(allowed)                       # True = blocked
        add = masks.to_additive(allowed, torch.float64)           # 0 / -inf
        hf_model = masks.from_hf_attention_mask(flags)[0, 0]      # (1, T): True = real
        if causal:
            hf_model = hf_model & attnlib.causal_mask(T)
        hf_model = hf_model.expand(T, T)
        cases.append({"T": T, "sdpa": allowed.int().reshape(-1).tolist(), "nn": nn_form.int().reshape(-1).tolist(),
                      "add": flat(add), "hf": flags[0].tolist(), "causal": causal})
        want.append((allowed, masks.from_nn_mha(nn_form), masks.from_additive(add), hf_model))
    got = driver.execute_script("""
        var E = window.attnlibEngine;
        return arguments[0].map(function (c) {
          var T = c.T, read = function (name, vals) { return Array.from(E.fromConvention(name, name === "additive" ? F(vals) : vals, T, T).data); };
          var back = E.boolMask(Uint8Array.from(c.sdpa), T, T);
          return {sdpa: read("sdpa", c.sdpa), nn: read("nn_mha", c.nn),
                  add: L(E.fromConvention("additive", F(c.add), T, T).data),
                  hf: Array.from(E.fromHF(c.hf, T, c.causal).data),
                  to: ["sdpa", "nn_mha", "additive"].map(function (n) { return L(E.toConvention(n, back)); })};
        });""", cases)
    for c, (allowed, from_nn, from_add, hf_model), r in zip(cases, want, got):
        a = allowed.int().reshape(-1).tolist()
        assert r["sdpa"] == a and r["nn"] == from_nn.int().reshape(-1).tolist() == a
        assert r["add"] == c["add"] and from_add.int().reshape(-1).tolist() == a
        assert r["hf"] == hf_model.int().reshape(-1).tolist()
        assert r["to"] == [c["sdpa"], c["nn"], c["add"]]       # and written back the same way


def test_attention_over_a_head_major_cache_equals_attnlib(driver):
    """attendHeadsCached (the live model's KV cache: (G, Tcap, D), first Tk rows filled) equals
    attnlib's attention per head, query head h reading key/value head h // (H / G)."""
    g = torch.Generator().manual_seed(6)
    cases, want = [], []
    for n in range(30):
        H = int(torch.randint(1, 5, (1,), generator=g))
        G = [d for d in range(1, H + 1) if H % d == 0][n % len([d for d in range(1, H + 1) if H % d == 0])]
        D, Tq = int(torch.randint(1, 5, (1,), generator=g)), int(torch.randint(1, 4, (1,), generator=g))
        Tk = Tq + int(torch.randint(0, 5, (1,), generator=g))
        Tcap = Tk + int(torch.randint(0, 4, (1,), generator=g))
        q = torch.randn(H, Tq, D, generator=g, dtype=torch.float64)
        k, v = (torch.randn(G, Tk, D, generator=g, dtype=torch.float64) for _ in range(2))
        cache_k, cache_v = (torch.full((G, Tcap, D), 7.0, dtype=torch.float64) for _ in range(2))  # junk beyond Tk
        cache_k[:, :Tk], cache_v[:, :Tk] = k, v
        mask = attnlib.causal_mask(Tq, Tk)
        rep = H // G
        out, w = attnlib.scaled_dot_product_attention(q, k.repeat_interleave(rep, 0), v.repeat_interleave(rep, 0),
                                                      attn_mask=mask, need_weights=True)
        cases.append({"q": flat(q.transpose(0, 1)), "k": flat(cache_k), "v": flat(cache_v), "Tq": Tq, "Tk": Tk, "Tcap": Tcap,
                      "H": H, "G": G, "D": D, "mask": {"kind": "bool", "rows": Tq, "cols": Tk, "data": mask.int().reshape(-1).tolist()}})
        want.append((out.transpose(0, 1).reshape(-1), w))
    got = driver.execute_script("""
        var E = window.attnlibEngine;
        return arguments[0].map(function (c) {
          var r = E.attendHeadsCached(F(c.q), F(c.k), F(c.v), c.Tq, c.Tk, c.Tcap, c.H, c.G, c.D, {mask: mask(c.mask)});
          return {out: L(r.merged), w: L(r.weights)};
        });""", cases)
    for (out, w), r in zip(want, got):
        assert np.abs(np.array(r["out"]) - out.numpy()).max() < TOL
        assert np.abs(np.array(r["w"]) - w.numpy().ravel()).max() < TOL
