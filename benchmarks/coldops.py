"""What the operations between a decode step's products cost, warm and cold.

A one-token step of GPT-2 small streams about 500 MB of weights through 49 products
(``FastDecoder._row_step``); between them run small operations: layer norms, the attention over
the cache, the cache writes, GELU, residual additions. Each of them starts right after a product
has pushed megabytes through the CPU caches. This benchmark times, in the same interleaved
rounds, at a cache of ``LENGTH`` tokens (``compare()``, baseline the real step):

* ``step``: the real step (what ``generate`` runs per token);
* ``stored_products``: the step with every product replaced by a stored result of its shape: the
  other operations back to back, with warm caches;
* ``summed_products``: the step with every product replaced by a sum over the same weight (the
  same bytes read, by the kernel that sets the reference read rate) and then a stored result;
* ``sums``: those sums alone;
* ``no_attention``, ``no_cache_write``, ``no_norms``, ``no_activation``: the step with one kind
  of operation left out (the attention returns q, the cache returns what it held, a norm or the
  activation returns its input): wrong logits, timing only.

``summed_products - sums`` is the cold cost of the non-product operations, ``stored_products``
their warm cost, ``step - no_X`` the cold cost of one kind. ``--only coldops`` (not in the
default set). The smoke mode runs the tiny model with ``kernels.CACHE_BYTES = 0`` so that the
same one-row step is taken.
"""
from __future__ import annotations

import contextlib
from typing import Callable

import torch

from attnlib import decode, kernels
from attnlib.cache import KVCache

from .fastpaths import switched, with_switch
from .generation import step_at
from .harness import Settings, Target, compare, fmt_table
from .models import build_pair

LENGTH = 48  # cached tokens: the middle of the first window of the generation benchmark
SHAPE = {"smoke": "smoke", "quick": "gpt2-small", "full": "gpt2-small"}


class _NoAttention:
    """Stands in for ``torch.nn.functional`` inside attnlib.decode: the attention returns q."""

    def __getattr__(self, name: str) -> object:
        return getattr(torch.nn.functional, name)

    @staticmethod
    def scaled_dot_product_attention(q: torch.Tensor, *args: object, **kwargs: object) -> torch.Tensor:
        return q


def variants(gpt: torch.nn.Module, vocab_size: int, device: str, seed: int
             ) -> tuple[dict[str, Callable[[], object]], int]:
    """The variants timed by :func:`run` (see the module docstring) and the number of products.
    Call under ``torch.inference_mode()``, with the one-row step available."""
    with switched(decode, "STREAMED_ROWS", "bags"):  # the products it replaces are RowBlocks calls
        fast = decode.FastDecoder.for_model(gpt)
        if fast is None or not fast.transposed:
            raise AssertionError("this benchmark needs the one-row step (transposed copies, x86 PyTorch)")
        step = step_at(gpt, LENGTH, vocab_size, device, seed)
    mats = [r.table for r in fast.row_products()]
    stored = {r.n_out: torch.zeros(1, r.n_out, device=device) for r in fast.row_products()}

    def stored_product(rows: kernels.RowBlocks, x: torch.Tensor) -> torch.Tensor:
        return stored[rows.n_out]

    def summed_product(rows: kernels.RowBlocks, x: torch.Tensor) -> torch.Tensor:
        rows.table.sum()
        return stored[rows.n_out]

    def held(cache: KVCache, i: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return cache.keys[i], cache.values[i]

    return {
        "step": step,
        "stored_products": with_switch(step, kernels.RowBlocks, "__call__", stored_product),
        "summed_products": with_switch(step, kernels.RowBlocks, "__call__", summed_product),
        "sums": lambda: [w.sum() for w in mats],
        "no_attention": with_switch(step, decode, "F", _NoAttention()),
        "no_cache_write": with_switch(step, KVCache, "update", held),
        "no_norms": with_switch(step, decode._Norm, "__call__", lambda self, x: x),
        "no_activation": with_switch(step, decode, "activate", lambda act, h, gate=None: h),
    }, len(mats)


def run(settings: Settings, *, calibration: dict | None = None, log=print) -> dict:
    shape = SHAPE[settings.mode]
    gpt, hf, cfg = build_pair(shape, settings)
    del hf
    with contextlib.ExitStack() as stack, torch.inference_mode():
        if shape == "smoke":  # a small model takes the one-row step only if treated as streamed
            stack.enter_context(switched(kernels, "CACHE_BYTES", 0))
        fns, products = variants(gpt, cfg.vocab_size, settings.device, settings.seed)
        res = compare(fns, settings, baseline="step")
    med, ratio = res["median_s"], res["ratio"]
    step_s = med["step"]
    row = {
        "shape": shape, "cache_len": LENGTH, "layers": cfg.n_layers, "products": products,
        "timing": res, "step_ms": step_s * 1e3,
        "warm_ms": med["stored_products"] * 1e3,
        # the same weight bytes read by sums, with and without the other operations between them
        "cold_ms": (med["summed_products"] - med["sums"]) * 1e3,
        "parts_ms": {name[3:]: (1.0 - ratio[name]) * step_s * 1e3 for name in fns if name.startswith("no_")},
    }
    log(f"  cold ops {shape}: step {row['step_ms']:.2f} ms, other ops warm {row['warm_ms']:.2f} ms, cold "
        f"{row['cold_ms']:.2f} ms; " + ", ".join(f"{k} {v:.2f}" for k, v in row["parts_ms"].items()))
    # not a goal but the claim the benchmarks page makes from this run: the other operations cost
    # several times their warm time when they run between products that stream the weights
    ratio_cold = row["cold_ms"] / row["warm_ms"] if row["warm_ms"] > 0 else float("nan")
    target = Target(f"cold ops {shape}: other ops cold / warm", ratio_cold, ">=", 2.0,
                    "a claim of the notes; the smoke model has no weights to stream" if shape == "smoke"
                    else "a claim of the notes, checked")
    return {"runs": [row], "targets": [target.to_dict()]}


def table(result: dict) -> str:
    rows = [[r["shape"], r["cache_len"], r["step_ms"], r["warm_ms"], r["cold_ms"],
             *(r["parts_ms"][k] for k in ("attention", "cache_write", "norms", "activation"))]
            for r in result["runs"]]
    return fmt_table(["shape", "cache", "step ms", "other ops warm ms", "other ops cold ms",
                      "attention ms", "cache writes ms", "norms ms", "activation ms"], rows)
