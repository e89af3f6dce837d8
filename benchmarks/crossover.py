"""Which matmul kernel for which product: the evidence for ``attnlib.kernels``' size bounds and
for the transposed weights of one-token decode steps.

``attnlib.kernels.linear`` sends a float32 CPU product with no gradient to oneDNN from
``MIN_MACS`` multiply-adds (rows x in x out), and a one-token decode step of a model larger than
the last-level cache from ``MIN_MACS_STREAMED``. This benchmark times oneDNN against
``F.linear`` (MKL) on products around those bounds, in interleaved rounds, two ways:

* **in cache**: the same weight every call, as in a small model or a product with many rows;
* **streamed**: one-row products cycling through copies of the weight that add up to 256 MiB
  (eight times this machine's last-level cache), so that every call reads its weight from memory,
  as a decode step of GPT-2 small does.

Each at one thread and at every core. The streamed cases also time the embedding-bag kernel on
transposed copies of the weights two ways: ``kernels.linear_t`` (W^T (in, out), its rows split
into one bag per thread) and ``kernels.RowBlocks`` (W^T cut into column blocks of about
``BLOCK_COLS`` columns, one bag per block: what ``FastDecoder`` uses for one token of a large
model), and a sum over a tensor of the same bytes: each kernel's time over the sum's is the
fraction of the read rate it reaches. For the largest shape RowBlocks is also timed at other
block widths (``widths``), the evidence for ``BLOCK_COLS``. Targets check the bounds against the
measurements.
``python -m benchmarks --full --only crossover`` (a few minutes; not in the default set).
"""
from __future__ import annotations

import dataclasses
import os

import torch
import torch.nn.functional as F

from attnlib import kernels

from .harness import Settings, Target, compare, fmt_table

SHAPES = [(256, 256), (384, 128), (768, 256), (1024, 256), (512, 512), (1536, 512), (768, 768),
          (2304, 768)]  # (out, in)
ROWS = [1, 4, 16, 64]
STREAM_BYTES = 256 * 2**20
WIDTHS = [64, 128, 512, 1024, 4096]  # block widths tried besides BLOCK_COLS, on the largest shape


def _row_blocks(wts: list[torch.Tensor], threads: int, cols: int) -> list[kernels.RowBlocks]:
    """RowBlocks of these W^T (in, out) with blocks of about ``cols`` columns."""
    old, kernels.BLOCK_COLS = kernels.BLOCK_COLS, cols
    try:
        out = []
        for wt in wts:
            n_in, n_out = wt.shape
            rb = kernels.RowBlocks(torch.empty(kernels.RowBlocks.shape(n_in, n_out, False, threads)),
                                   n_in, n_out, False, threads)
            rb.fill([(wt.t(), None)])
            out.append(rb)
        return out
    finally:
        kernels.BLOCK_COLS = old


def _onednn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """oneDNN as ``kernels.linear`` calls it: on the weight's packed copy (made at the first call)."""
    return torch.ops.mkldnn._linear_pointwise(x, kernels.packed(w), None, "none", [], "")


def _cases(mode: str) -> list[tuple[str, int, int, int]]:
    """(where, rows, out, in) to time."""
    shapes = SHAPES[:3] if mode == "smoke" else SHAPES
    rows = ROWS[:2] if mode == "smoke" else ROWS
    hot = [("in cache", m, o, i) for m in rows for o, i in shapes if m * o * i <= 2**23]
    cold = [("streamed", 1, o, i) for o, i in shapes]
    return hot + cold


def run(settings: Settings, *, calibration: dict | None = None, log=print) -> dict:
    """Time oneDNN against F.linear per case and thread count; return JSON-ready results."""
    if not kernels._HAS_ONEDNN or settings.is_cuda:
        return {"runs": [], "targets": [Target("oneDNN is available (x86-64 CPU)", None, ">=", 1.0).to_dict()]}
    threads = sorted({1, os.cpu_count() or 1})
    stream = STREAM_BYTES if settings.mode != "smoke" else 4 * 2**20
    rows = []
    g = torch.Generator().manual_seed(settings.seed)
    with torch.inference_mode():
        for n in threads:
            # many small cases: fewer, shorter rounds than the other benchmarks
            s = dataclasses.replace(settings, threads=n, rounds=min(settings.rounds, 5),
                                    block_s=min(settings.block_s, 0.1))
            for where, m, o, i in _cases(settings.mode):
                copies = max(1, stream // (o * i * 4)) if where == "streamed" else 1
                ws = [torch.randn(o, i, generator=g) for _ in range(copies)]
                x = torch.randn(1, m, i, generator=g)
                torch.testing.assert_close(_onednn(x, ws[0]), F.linear(x, ws[0]), atol=1e-3, rtol=1e-4)
                variants = {"onednn": lambda: [_onednn(x, w) for w in ws],
                            "f_linear": lambda: [F.linear(x, w) for w in ws]}
                if where == "streamed":  # transposed copies (as FastDecoder holds them) and a plain read
                    wts = [w.t().contiguous() for w in ws]
                    flat = torch.randn(copies * o * i, generator=g)
                    torch.testing.assert_close(kernels.linear_t(x, wts[0]), F.linear(x, ws[0]), atol=1e-3, rtol=1e-4)
                    variants["linear_t"] = lambda: [kernels.linear_t(x, w) for w in wts]
                    widths = [kernels.BLOCK_COLS] + (WIDTHS if (o, i) == max(SHAPES, key=lambda p: p[0] * p[1])
                                                      and settings.mode != "smoke" else [])
                    x2 = x.view(1, i)
                    for cols in widths:
                        rbs = _row_blocks(wts, n, cols)
                        torch.testing.assert_close(rbs[0](x2), F.linear(x2, ws[0]), atol=1e-3, rtol=1e-4)
                        name = "row_blocks" if cols == kernels.BLOCK_COLS else f"row_blocks_{cols}"
                        variants[name] = (lambda rbs: lambda: [r(x2) for r in rbs])(rbs)
                    variants["read"] = flat.sum
                res = compare(variants, s, baseline="f_linear")
                row = {"where": where, "rows": m, "out": o, "in": i, "macs": m * o * i, "threads": n,
                       "copies": copies, "timing": res, "onednn_over_f_linear": res["ratio"]["onednn"],
                       "f_linear_us": res["median_s"]["f_linear"] / copies * 1e6}
                if where == "streamed":
                    r = res["ratio"]
                    row.update(linear_t_over_best=r["linear_t"] / min(r["onednn"], 1.0),
                               row_blocks_over_linear_t=r["row_blocks"] / r["linear_t"],
                               fraction_of_read={k: r["read"] / r[k] for k in r if k != "read"})
                rows.append(row)
                log(f"  {where:8s} threads={n} {m}x{i}->{o} ({m * o * i} MACs): "
                    f"oneDNN/F.linear {res['ratio']['onednn']:.2f}"
                    + (f", linear_t/best {row['linear_t_over_best']:.2f}, linear_t reads at "
                       f"{row['fraction_of_read']['linear_t']:.2f} of a sum, RowBlocks at "
                       f"{row['fraction_of_read']['row_blocks']:.2f}" if where == "streamed" else ""))
                del ws, variants
    targets = []
    for n in threads:
        mine = [r for r in rows if r["threads"] == n]
        below = [r["onednn_over_f_linear"] for r in mine if r["where"] == "in cache" and r["macs"] < kernels.MIN_MACS]
        above = [r["onednn_over_f_linear"] for r in mine if r["where"] == "in cache"
                 and r["macs"] >= 4 * kernels.MIN_MACS]
        streamed = [r["onednn_over_f_linear"] for r in mine if r["where"] == "streamed"
                    and r["macs"] >= kernels.MIN_MACS_STREAMED]
        if below:
            targets.append(Target(f"crossover {n} thread(s): in cache, below MIN_MACS, fastest oneDNN / F.linear",
                                  min(below), ">=", 1.0, "F.linear is the right choice there"))
        if above:
            targets.append(Target(f"crossover {n} thread(s): in cache, from 4 x MIN_MACS, slowest oneDNN / F.linear",
                                  max(above), "<=", 1.0, "oneDNN is the right choice there"))
        if streamed:
            targets.append(Target(f"crossover {n} thread(s): streamed, from MIN_MACS_STREAMED, slowest oneDNN / "
                                  "F.linear", max(streamed), "<=", 1.0, "oneDNN is the right choice there"))
        transposed = [r["linear_t_over_best"] for r in mine if "linear_t_over_best" in r]
        if transposed and kernels._HAS_ROWS:
            targets.append(Target(f"crossover {n} thread(s): streamed, one row, slowest linear_t (transposed) / "
                                  "the faster of oneDNN and F.linear", max(transposed), "<=", 1.0,
                                  "FastDecoder's transposed weights are the right choice there"))
        blocked = [r["row_blocks_over_linear_t"] for r in mine
                   if "row_blocks_over_linear_t" in r and r["out"] >= 4 * kernels.BLOCK_COLS]
        if blocked and kernels._HAS_ROWS:
            targets.append(Target(f"crossover {n} thread(s): streamed, one row, from 4 x BLOCK_COLS outputs, "
                                  "slowest RowBlocks / linear_t", max(blocked), "<=", 1.0,
                                  "FastDecoder's column blocks are the right choice there"))
    return {"min_macs": kernels.MIN_MACS, "min_macs_streamed": kernels.MIN_MACS_STREAMED, "stream_bytes": stream,
            "block_cols": kernels.BLOCK_COLS,
            "runs": rows, "targets": [t.to_dict() for t in targets]}


def table(result: dict) -> str:
    """One row per case: MACs, where the weight is, threads, the ratio."""
    rows = [[r["where"], r["threads"], f"{r['rows']}x{r['in']}->{r['out']}", r["macs"], r["f_linear_us"],
             r["onednn_over_f_linear"], r.get("linear_t_over_best", ""), r.get("row_blocks_over_linear_t", "")]
            for r in sorted(result["runs"], key=lambda r: (r["where"], r["threads"], r["macs"]))]
    return fmt_table(["weight", "threads", "product", "MACs", "F.linear us", "oneDNN / F.linear",
                      "linear_t / best", "RowBlocks / linear_t"], rows)
