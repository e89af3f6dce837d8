"""Fast paths: each of attnlib's speed-ups against the plain code it replaces, side by side.

All ratios come from one ``compare()`` call per pair (interleaved rounds, same load):

* fused q/k/v: a no-grad forward (prefill) with one stacked q/k/v matmul per layer against the
  three ``nn.Linear`` (``MultiHeadAttention.fuse_qkv = False``);
* preallocated cache: one decode step with the cache holding ``length`` tokens, writing in place
  into reserved buffers, against concatenating the whole cache (``KVCache.preallocate = False``);
* oneDNN matmuls: a no-grad forward (prefill) and one decode step with ``attnlib.kernels``
  choosing oneDNN for the large float32 matmuls (and, in the step, ``kernels.RowBlocks`` on
  transposed weights for a model larger than the caches, one addmm on a contiguous W^T copy for
  one within them), against the same with ``F.linear`` everywhere (``kernels.USE_ONEDNN =
  USE_ROWS = False``, ``decode.USE_PLAIN_ROWS = False``: the BLAS PyTorch was built with, MKL in
  the pip wheels);
* large results in huge pages: the LM head's product over ``BIG_ROWS`` tokens (logits of
  ``kernels.BIG_OUTPUT`` bytes or more, GPT-2 small only) by ``kernels.linear``, which writes it
  into ``kernels.result_empty`` (2 MiB pages, reused from the last call's result once that is
  gone), against ``F.linear`` (a fresh 4 KiB-page mapping per call);
* Python overhead per token: one cached decode step three ways, the model's own forward
  (``gpt(tok, cache=cache)``: checks, cache binding, undo on error), the decode loop of
  ``generate`` (``attnlib.decode.FastDecoder``) and a raw loop with the same weights and the same
  matmul kernels (``F.layer_norm``, ``FastDecoder.linear``, ``F.scaled_dot_product_attention``,
  in-place cache writes, no checks), so ``attnlib - raw`` is what the library's Python costs;
* small exact GELU (CPU): ``kernels.gelu`` (ATen's kernel below ``kernels.GELU_ATEN_MAX``
  elements) against ``F.gelu`` (oneDNN's eltwise primitive) on one row of the FFN's hidden layer,
  what a one-token step's GELU sees;
* ``torch.compile`` (``--compile`` only; compiling takes minutes on a busy CPU): the compiled
  forward against the eager one.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

import torch
import torch.nn.functional as F

import attnlib
from attnlib import decode, kernels
from attnlib.decode import FastDecoder

from .harness import Settings, Target, compare, fmt_table
from .models import build_pair

BIG_ROWS = 1024
RUNS = {"smoke": [("smoke", 8, 8)], "quick": [("tiny", 256, 512)], "full": [("tiny", 128, 128), ("gpt2-small", 128, 128)]}


@contextmanager
def switched(cls: object, name: str, value: object) -> Iterator[None]:
    """Set a class-wide switch (``fuse_qkv``, ``preallocate``), or any attribute of a class or
    module, for the duration."""
    old = getattr(cls, name)
    setattr(cls, name, value)
    try:
        yield
    finally:
        setattr(cls, name, old)


def with_switch(fn: Callable[[], object], cls: object, name: str, value: object) -> Callable[[], object]:
    def call() -> object:
        with switched(cls, name, value):
            return fn()
    return call


def step_fn(gpt: torch.nn.Module, length: int, vocab_size: int, device: str, seed: int) -> Callable[[], torch.Tensor]:
    """One cached decode step at ``length`` held tokens; the cache is cut back after each call."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab_size, (1, length + 1), generator=g).to(device)
    cache = attnlib.KVCache()
    cache.reserve(1)
    gpt(ids[:, :length], cache=cache)
    tok = ids[:, length:]  # (1, 1)

    def step() -> torch.Tensor:
        out = gpt(tok, cache=cache).logits[:, -1]
        cache.keys = [k[:, :, :length] for k in cache.keys]  # views: the next step writes in place again
        cache.values = [v[:, :, :length] for v in cache.values]
        return out

    return step


def fast_step_fn(gpt: attnlib.GPT, length: int, vocab_size: int, device: str, seed: int) -> Callable[[], torch.Tensor]:
    """:func:`step_fn` through ``generate``'s decode loop (``FastDecoder.step``) instead of the forward."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab_size, (1, length + 1), generator=g).to(device)
    cache = attnlib.KVCache()
    cache.reserve(1)
    fast = FastDecoder.for_model(gpt)
    if fast is None:
        raise AssertionError("generate would not use the fast decode loop for this model")
    fast.step(ids[:, :length], cache)
    tok = ids[:, length:]  # (1, 1)

    def step() -> torch.Tensor:
        out = fast.step(tok, cache)  # (1, vocab)
        cache.keys = [k[:, :, :length] for k in cache.keys]  # views: the next step writes in place again
        cache.values = [v[:, :, :length] for v in cache.values]
        return out

    return step


def raw_step_fn(gpt: attnlib.GPT, length: int, vocab_size: int, device: str, seed: int) -> Callable[[], torch.Tensor]:
    """The same decode step as :func:`step_fn`, written as a bare loop of torch functions (with
    the matmul kernels and weights ``generate``'s loop uses: the copies of its one-row step,
    ``kernels.RowBlocks`` or ``_RowProduct``, or ``FastDecoder.linear`` on its matrices where it
    has none, so that only the Python differs).

    Pre-norm LayerNorm GPT with learned positions and GELU (the benchmark models); the caches are
    preallocated tensors written in place. Checked equal to ``gpt`` before it is timed."""
    cfg = gpt.cfg
    H, G, D = cfg.n_heads, cfg.n_kv_heads or cfg.n_heads, cfg.d_model // cfg.n_heads
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab_size, (1, length + 1), generator=g).to(device)
    cache = attnlib.KVCache()
    gpt(ids[:, :length], cache=cache)
    ks = [torch.cat([k, k[:, :, :1]], dim=2) for k in cache.keys]  # (1, G, length + 1, D)
    vs = [torch.cat([v, v[:, :, :1]], dim=2) for v in cache.values]
    fast = FastDecoder.for_model(gpt)  # the same kernels and weights as generate's loop
    assert fast is not None, "the benchmark models take generate's fast loop"
    m, lin = fast.token_min_macs, fast.linear
    tok_w, pos_w = gpt.embed.tok_emb.weight, gpt.embed.pos_emb.weight
    nf = gpt.norm_f
    tok, eps, C = ids[:, length:], cfg.layer_norm_eps, cfg.d_model
    approximate = "tanh" if cfg.activation == "gelu_tanh" else "none"
    if fast.head_rows is not None:  # one row (1, C) through the copies (RowBlocks or _RowProduct)
        layers = [(l.norm1, f.rows[0], f.rows[1], l.norm3, f.rows[2], f.rows[3])
                  for l, f in zip(gpt.layers, fast.layers)]  # qkv, out, fc1, fc2 (no gate in GPT-2)
        head = fast.head_rows

        def row_step() -> torch.Tensor:
            x = tok_w[tok.view(1)] + pos_w[length]  # (1, C)
            for i, (n1, qkv, o, n3, f1, f2) in enumerate(layers):
                h = F.layer_norm(x, (C,), n1.weight, n1.bias, eps)
                q, k, v = qkv(h).view(3, 1, H, 1, D)  # G == H in the benchmark models
                ks[i][:, :, length:length + 1] = k
                vs[i][:, :, length:length + 1] = v
                a = F.scaled_dot_product_attention(q, ks[i], vs[i])  # (1, H, 1, D)
                x = x + o(a.reshape(1, C))
                h = F.layer_norm(x, (C,), n3.weight, n3.bias, eps)
                x = x + f2(kernels.gelu(f1(h), approximate))
            return head(F.layer_norm(x, (C,), nf.weight, nf.bias, eps))

        return row_step
    # kernels.linear (oneDNN where it pays off) on the module's weights, q/k/v stacked
    layers = [(l.norm1, f.qkv, f.out[1], f.out[0], l.norm3, f.fc1, f.fc2)
              for l, f in zip(gpt.layers, fast.layers)]

    def step() -> torch.Tensor:
        x = tok_w[tok] + pos_w[length]  # (1, 1, C)
        for i, (n1, (w, b), ob, o, n3, f1, f2) in enumerate(layers):
            h = F.layer_norm(x, (C,), n1.weight, n1.bias, eps)
            q, k, v = lin(h, w, b, m).split([C, G * D, G * D], dim=-1)
            ks[i][:, :, length] = k.view(1, G, D)
            vs[i][:, :, length] = v.view(1, G, D)
            a = F.scaled_dot_product_attention(q.view(1, 1, H, D).transpose(1, 2), ks[i], vs[i],
                                               enable_gqa=G != H)  # (1, H, 1, D)
            x = x + lin(a.transpose(1, 2).reshape(1, 1, C), o, ob, m)
            h = F.layer_norm(x, (C,), n3.weight, n3.bias, eps)
            x = x + lin(kernels.gelu(lin(h, *f1, m), approximate), *f2, m)
        return lin(F.layer_norm(x, (C,), nf.weight, nf.bias, eps), fast.head, None, m)[:, -1]

    return step


def run(settings: Settings, *, calibration: dict | None = None, log=print, compile_variant: bool = False) -> dict:
    """Time each fast path against its plain version; return JSON-ready results and targets."""
    rows = []
    for shape, T, length in RUNS[settings.mode]:
        gpt, _, cfg = build_pair(shape, settings)
        g = torch.Generator().manual_seed(settings.seed)
        ids = torch.randint(0, cfg.vocab_size, (1, T), generator=g).to(settings.device)
        with torch.inference_mode():
            fwd = lambda: gpt(ids).logits  # noqa: E731
            tol = dict(atol=1e-4, rtol=1e-4) if settings.dtype == "float32" else dict(atol=0.1, rtol=0.05)
            torch.testing.assert_close(fwd(), with_switch(fwd, attnlib.MultiHeadAttention, "fuse_qkv", False)(), **tol)
            fused = compare({"fused": fwd, "three_linears": with_switch(fwd, attnlib.MultiHeadAttention,
                                                                         "fuse_qkv", False)},
                            settings, baseline="three_linears")
            step = step_fn(gpt, length, cfg.vocab_size, settings.device, settings.seed)
            cat_step = with_switch(step_fn(gpt, length, cfg.vocab_size, settings.device, settings.seed),
                                   attnlib.KVCache, "preallocate", False)
            prealloc = compare({"preallocated": step, "concatenate": cat_step}, settings, baseline="concatenate")
            raw = raw_step_fn(gpt, length, cfg.vocab_size, settings.device, settings.seed)
            fast = fast_step_fn(gpt, length, cfg.vocab_size, settings.device, settings.seed)
            torch.testing.assert_close(raw(), step(), **tol)
            torch.testing.assert_close(fast(), step(), **tol)
            overhead = compare({"attnlib": step, "generate_loop": fast, "raw_sdpa_loop": raw}, settings,
                               baseline="raw_sdpa_loop")
            blas = with_switch(fwd, kernels, "USE_ONEDNN", False)
            torch.testing.assert_close(fwd(), blas(), **tol)
            onednn = compare({"onednn": fwd, "f_linear": blas, "onednn_step": fast,
                              # F.linear everywhere: no oneDNN, no transposed weights either
                              "f_linear_step": with_switch(with_switch(with_switch(
                                  fast, kernels, "USE_ROWS", False), kernels, "USE_ONEDNN", False),
                                  decode, "USE_PLAIN_ROWS", False)},
                             settings, baseline="f_linear")
            onednn_step = onednn["ratio"]["onednn_step"] / onednn["ratio"]["f_linear_step"]
            kinds = None  # a model over the caches: its one-token products both ways
            probe = FastDecoder.for_model(gpt)
            if probe is not None and probe.streamed and kernels._HAS_ROWS:
                kind_steps = {}
                for kind in ("bags", "mm"):
                    with switched(decode, "STREAMED_ROWS", kind):
                        kind_steps[kind] = fast_step_fn(gpt, length, cfg.vocab_size, settings.device,
                                                        settings.seed)
                    torch.testing.assert_close(kind_steps[kind](), step(), **tol)
                kinds = compare(kind_steps, settings, baseline="bags")
            del probe
            gelu_row = None  # one row of the hidden layer, as a one-token step's GELU sees it
            if settings.device == "cpu":
                u = torch.randn(1, cfg.d_ff, generator=g)
                torch.testing.assert_close(kernels.gelu(u), F.gelu(u), atol=1e-6, rtol=1e-6)
                gelu_row = compare({"aten": lambda: kernels.gelu(u), "f_gelu": lambda: F.gelu(u)}, settings,
                                   baseline="f_gelu")
            head = gpt.lm_head.weight
            h = torch.randn(BIG_ROWS, cfg.d_model, generator=g).to(settings.device, head.dtype)
            big = None
            if kernels._big_output_ok(h, head, None):
                torch.testing.assert_close(kernels.linear(h, head), F.linear(h, head), **tol)
                big = compare({"huge_pages": lambda: kernels.linear(h, head), "f_linear": lambda: F.linear(h, head)},
                              settings, baseline="f_linear")
        row = {
            "shape": shape, "T": T, "cache_len": length,
            "fused_qkv": fused, "fused_over_unfused": fused["ratio"]["fused"],
            "preallocated_cache": prealloc, "preallocated_over_concat": prealloc["ratio"]["preallocated"],
            "overhead": overhead, "attnlib_over_raw_step": overhead["ratio"]["attnlib"],
            "overhead_us_per_token": 1e6 * (overhead["median_s"]["attnlib"] - overhead["median_s"]["raw_sdpa_loop"]),
            "generate_loop_over_raw_step": overhead["ratio"]["generate_loop"],
            "generate_loop_us_per_token": 1e6 * (overhead["median_s"]["generate_loop"]
                                                 - overhead["median_s"]["raw_sdpa_loop"]),
            "onednn": onednn, "onednn_over_f_linear": onednn["ratio"]["onednn"],
            "onednn_step_over_f_linear_step": onednn_step,
            "big_result": big, "big_result_over_f_linear": big["ratio"]["huge_pages"] if big else None,
            "streamed_kinds": kinds, "streamed_rows": decode.STREAMED_ROWS,
            "mm_over_bags_step": kinds["ratio"]["mm"] if kinds else None,
            "gelu_row": gelu_row, "small_gelu_over_f_gelu": gelu_row["ratio"]["aten"] if gelu_row else None,
            "compile": None,
        }
        if compile_variant:
            compiled = torch.compile(gpt)
            with torch.inference_mode():
                torch.testing.assert_close(compiled(ids).logits, fwd(), **tol)
                row["compile"] = compare({"compiled": lambda: compiled(ids).logits, "eager": fwd}, settings,
                                         baseline="eager")
        rows.append(row)
        log(f"  fast paths {shape}: fused/3 linears {row['fused_over_unfused']:.3f}x (T={T}), preallocated/concat "
            f"step {row['preallocated_over_concat']:.3f}x (cache {length}), attnlib/raw step "
            f"{row['attnlib_over_raw_step']:.2f}x = {row['overhead_us_per_token']:.0f} us/token of Python, generate's "
            f"loop/raw {row['generate_loop_over_raw_step']:.2f}x, oneDNN/F.linear forward "
            f"{row['onednn_over_f_linear']:.2f}x, step {row['onednn_step_over_f_linear_step']:.2f}x"
            + (f", large result in huge pages/F.linear {row['big_result_over_f_linear']:.2f}x" if big else "")
            + (f", one-token products mm on W^T/RowBlocks {row['mm_over_bags_step']:.3f}x" if kinds else ""))
        del gpt
    targets = []
    for r in rows:
        targets.append(Target(f"fast paths {r['shape']}: fused q/k/v / three linears (forward T={r['T']})",
                              r["fused_over_unfused"], "<=", 1.0, "one matmul instead of three"))
        targets.append(Target(f"fast paths {r['shape']}: preallocated / concatenated cache (decode step)",
                              r["preallocated_over_concat"], "<=", 1.0, "no copy of the held cache per step"))
        if r["onednn_over_f_linear"] is not None and r["shape"] != "smoke":
            targets.append(Target(f"fast paths {r['shape']}: oneDNN / F.linear (forward T={r['T']})",
                                  r["onednn_over_f_linear"], "<=", 1.0,
                                  "attnlib.kernels picks oneDNN only where it is faster"))
        if r.get("onednn_step_over_f_linear_step") is not None and r["shape"] != "smoke":
            targets.append(Target(f"fast paths {r['shape']}: decode step, attnlib's kernels / F.linear everywhere",
                                  r["onednn_step_over_f_linear_step"], "<=", 1.0,
                                  "oneDNN, the embedding bags and the W^T copies only where faster"))
        if r.get("mm_over_bags_step") is not None:
            chosen = r["streamed_rows"]
            ratio = r["mm_over_bags_step"] if chosen == "mm" else 1.0 / r["mm_over_bags_step"]
            targets.append(Target(f"fast paths {r['shape']}: decode step, one-token products as chosen "
                                  f"({chosen}) / the other way", ratio, "<=", 1.0,
                                  "decode.STREAMED_ROWS picks the faster kernel for this CPU"))
        if r.get("small_gelu_over_f_gelu") is not None:
            targets.append(Target(f"fast paths {r['shape']}: exact GELU of one hidden row, kernels.gelu / F.gelu",
                                  r["small_gelu_over_f_gelu"], "<=", 1.0,
                                  "ATen's kernel instead of oneDNN's fixed cost per call"))
        if r.get("big_result_over_f_linear") is not None:
            targets.append(Target(f"fast paths {r['shape']}: LM head over {BIG_ROWS} tokens, huge pages / F.linear",
                                  r["big_result_over_f_linear"], "<=", 1.0,
                                  "a large result costs page faults at every call"))
    return {"runs": rows, "targets": [t.to_dict() for t in targets]}


def table(result: dict) -> str:
    """Ratios as plain text."""
    rows = [[r["shape"], r["T"], r["cache_len"], r["fused_over_unfused"], r["preallocated_over_concat"],
             r.get("onednn_over_f_linear"), r.get("onednn_step_over_f_linear_step"),
             r.get("big_result_over_f_linear") or "-", r.get("mm_over_bags_step") or "-",
             r.get("small_gelu_over_f_gelu") or "-",
             r["attnlib_over_raw_step"], r.get("generate_loop_over_raw_step"), r.get("generate_loop_us_per_token"),
             r["compile"]["ratio"]["compiled"] if r.get("compile") else "not run"] for r in result["runs"]]
    return fmt_table(["shape", "T", "cache", "fused/3 linears", "prealloc/concat", "oneDNN/F.linear",
                      "oneDNN/F.linear step", "large result huge pages/F.linear", "mm W^T/bags step",
                      "GELU row kernels/F",
                      "forward step/raw",
                      "generate step/raw", "generate us/token over raw", "compiled/eager"], rows)
