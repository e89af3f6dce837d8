"""Attention: the math path (every weight formed) against the fused kernel, as T grows.

For each sequence length T (one batch, GPT-2 small's heads: H=12, D=64):

* math / sdpa: time and peak memory. The math path materialises the (B, H, T, T) scores and
  weights: memory grows like T^2. The fused kernel works tile by tile and needs memory linear in
  T (the lesson of chapter 12);
* overhead: ``attnlib.scaled_dot_product_attention(backend="sdpa")`` / ``F.scaled_dot_product_attention``
  (what attnlib's argument checks cost in front of the same kernel);
* causal: ``is_causal=True`` against the same causal mask passed explicitly, which the kernel
  must read.

The profiler's op names record which SDPA kernel ran (for example
``aten::_scaled_dot_product_flash_attention_for_cpu``).
"""
from __future__ import annotations

import statistics

import torch
import torch.nn.functional as F

import attnlib

from .harness import Settings, Target, compare, fmt_table, profile_calls

SIZES = {"smoke": [32, 64], "quick": [128, 512, 1024, 2048], "full": [128, 512, 1024, 2048, 4096]}
HEADS, HEAD_DIM = 12, 64


def _qkv(T: int, settings: Settings) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator(device=settings.device).manual_seed(settings.seed)
    shape = (1, HEADS, T, HEAD_DIM)  # (B, H, T, D)
    return tuple(torch.randn(shape, generator=g, device=settings.device, dtype=settings.torch_dtype) for _ in range(3))


def run(settings: Settings, *, log=print) -> dict:
    """Run the kernel benchmarks; return their JSON-ready results and targets."""
    sdpa = attnlib.scaled_dot_product_attention
    rows, causal_rows = [], []
    for T in SIZES[settings.mode]:
        q, k, v = _qkv(T, settings)
        # the three variants compute the same thing: check before timing anything
        ref = F.scaled_dot_product_attention(q, k, v)
        tol = dict(atol=2e-2, rtol=2e-2) if settings.dtype != "float32" else dict(atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(sdpa(q, k, v, backend="sdpa")[0], ref, **tol)
        torch.testing.assert_close(sdpa(q, k, v, backend="math")[0], ref, **tol)
        variants = {
            "torch_sdpa": lambda: F.scaled_dot_product_attention(q, k, v),
            "attnlib_sdpa": lambda: sdpa(q, k, v, backend="sdpa"),
            "attnlib_math": lambda: sdpa(q, k, v, backend="math"),
        }
        res = compare(variants, settings, baseline="torch_sdpa")
        elem = q.element_size()
        tt_bytes = q.shape[0] * HEADS * T * T * elem  # one (B, H, T, T) tensor
        out_bytes = q.numel() * elem                   # one (B, H, T, D) tensor
        mem = profile_calls(variants, settings.device)
        rows.append({
            "T": T,
            "timing": res,
            "overhead": res["ratio"]["attnlib_sdpa"],
            "math_over_sdpa": res["median_s"]["attnlib_math"] / res["median_s"]["attnlib_sdpa"],
            "tt_bytes": tt_bytes,
            "out_bytes": out_bytes,
            "memory": mem,
            "math_peak_in_tt": mem["attnlib_math"]["peak_bytes"] / tt_bytes,
            "sdpa_peak_in_out": mem["attnlib_sdpa"]["peak_bytes"] / out_bytes,
        })

        mask = attnlib.causal_mask(T, device=settings.device)
        torch.testing.assert_close(sdpa(q, k, v, is_causal=True, backend="sdpa")[0],
                                   sdpa(q, k, v, attn_mask=mask, backend="sdpa")[0], **tol)
        cvariants = {
            "is_causal": lambda: sdpa(q, k, v, is_causal=True, backend="sdpa"),
            "bool_mask": lambda: sdpa(q, k, v, attn_mask=mask, backend="sdpa"),
        }
        cres = compare(cvariants, settings, baseline="is_causal")
        cmem = profile_calls(cvariants, settings.device)
        causal_rows.append({"T": T, "timing": cres, "memory": cmem,
                            "mask_over_is_causal": cres["ratio"]["bool_mask"]})
        log(f"  attention T={T}: overhead {rows[-1]['overhead']:.3f}x, math/sdpa "
            f"{rows[-1]['math_over_sdpa']:.2f}x, mask/is_causal {causal_rows[-1]['mask_over_is_causal']:.2f}x"
            f"{' (noisy)' if res['noisy'] or cres['noisy'] else ''}")

    first, last = rows[0], rows[-1]
    growth = last["memory"]["attnlib_sdpa"]["peak_bytes"] / max(1, first["memory"]["attnlib_sdpa"]["peak_bytes"])
    targets = [
        Target("attention: attnlib sdpa / torch sdpa (median over T)",
               statistics.median(r["overhead"] for r in rows), "<=", 1.05,
               "argument checks before the same kernel"),
        Target(f"attention: math peak memory / one (B,H,T,T) tensor at T={last['T']}",
               last["math_peak_in_tt"], ">=", 2.0, "scores and weights live at once"),
        Target(f"attention: sdpa peak-memory growth T={first['T']}->{last['T']} / T growth",
               growth / (last["T"] / first["T"]), "<=", 1.5, "O(T): growth no faster than T"),
    ]
    return {"heads": HEADS, "head_dim": HEAD_DIM, "batch": 1, "sizes": rows, "causal": causal_rows,
            "targets": [t.to_dict() for t in targets]}


def table(result: dict) -> str:
    """Medians and ratios as plain text."""
    mib = 2**20
    rows = []
    for r, c in zip(result["sizes"], result["causal"]):
        m = r["timing"]["median_s"]
        rows.append([
            r["T"], m["torch_sdpa"] * 1e3, m["attnlib_sdpa"] * 1e3, r["overhead"], m["attnlib_math"] * 1e3,
            r["math_over_sdpa"], r["memory"]["attnlib_sdpa"]["peak_bytes"] / mib,
            r["memory"]["attnlib_math"]["peak_bytes"] / mib, r["tt_bytes"] / mib,
            c["mask_over_is_causal"],
            ",".join(k.replace("aten::_scaled_dot_product_", "") for k in r["memory"]["attnlib_sdpa"]["sdpa_kernels"]),
        ])
    head = ["T", "torch ms", "attnlib ms", "overhead", "math ms", "math/sdpa", "sdpa MiB", "math MiB",
            "TxT MiB", "mask/causal", "kernel"]
    return fmt_table(head, rows)
