"""``torch.compile`` against eager mode: a forward pass and one decode step of the same model.

attnlib's forward compiles to one graph (no graph breaks: the checks that read tensor values run
in eager mode only), so the compiled and the eager model compute the same thing and differ only
in how the work is scheduled. Measured, with the time of the first (compiling) call:

* forward over T tokens (a prefill): compiled / eager time;
* one decode step with a KVCache held at a fixed length (the step is run, then the cache is put
  back with ``KVCache.restore``): compiled / eager time. This is the compiled step at its best;
* a real decode, where the cache grows by one token per step: the cache's lengths are Python
  ints, so the compiled step is specialised to each length and compiled again (counted as
  graphs compiled per step). Compiling a decode loop well needs a fixed-size cache, as
  gpt-fast has; attnlib keeps the growing one, which is simpler to read.
"""
from __future__ import annotations

import time

import torch

import attnlib

from .harness import Settings, Target, compare, fmt_table, synchronize
from .models import build_pair

RUNS = {"smoke": ("smoke", 16), "quick": ("tiny", 256), "full": ("tiny", 512)}


def graphs_compiled() -> int:
    from torch._dynamo.utils import counters
    return int(counters["stats"]["unique_graphs"])


def run(settings: Settings, *, log=print) -> dict:
    shape, T = RUNS[settings.mode]
    gpt, _, cfg = build_pair(shape, settings)
    torch._dynamo.reset()
    compiled = torch.compile(gpt)
    g = torch.Generator().manual_seed(settings.seed)
    ids = torch.randint(0, cfg.vocab_size, (1, T + 1), generator=g).to(settings.device)
    with torch.inference_mode():
        breaks = torch._dynamo.explain(gpt)(ids[:, :T]).graph_break_count
        synchronize(settings.device)
        t0 = time.perf_counter()
        out = compiled(ids[:, :T]).logits
        synchronize(settings.device)
        compile_forward_s = time.perf_counter() - t0
        tol = dict(atol=1e-4, rtol=1e-4) if settings.dtype == "float32" else dict(atol=0.1, rtol=0.05)
        torch.testing.assert_close(out, gpt(ids[:, :T]).logits, **tol)
        fwd = compare({"eager": lambda: gpt(ids[:, :T]).logits,
                       "compiled": lambda: compiled(ids[:, :T]).logits}, settings, baseline="eager")

        cache = attnlib.KVCache()
        gpt(ids[:, :T], cache=cache)
        tok = ids[:, T:]

        def step(model: torch.nn.Module):
            def call() -> torch.Tensor:
                logits = model(tok, cache=cache, logits_to_keep=1).logits
                cache.crop(T)
                return logits
            return call

        t0 = time.perf_counter()
        step(compiled)()
        synchronize(settings.device)
        compile_step_s = time.perf_counter() - t0
        step_breaks = torch._dynamo.explain(gpt)(tok, cache=cache, logits_to_keep=1).graph_break_count
        cache.crop(T)
        dec = compare({"eager": step(gpt), "compiled": step(compiled)}, settings, baseline="eager")

        n_steps = 2 if settings.mode == "smoke" else 16  # a real decode: the cache grows each step
        before = graphs_compiled()
        nxt = tok
        for _ in range(n_steps):
            nxt = compiled(nxt, cache=cache, logits_to_keep=1).logits[:, -1:].argmax(-1)
        new_graphs = graphs_compiled() - before
        per_step = new_graphs / n_steps
    row = {"shape": shape, "T": T, "graph_breaks_forward": breaks, "graph_breaks_step": step_breaks,
           "compile_forward_s": compile_forward_s, "compile_step_s": compile_step_s,
           "forward": fwd, "step": dec, "compiled_over_eager_forward": fwd["ratio"]["compiled"],
           "compiled_over_eager_step": dec["ratio"]["compiled"], "graphs_compiled_per_growing_step": per_step,
           "growing_steps": n_steps, "graphs_compiled_growing": new_graphs}
    log(f"  compile {shape}: forward T={T} compiled/eager {row['compiled_over_eager_forward']:.2f}x "
        f"(first call {compile_forward_s:.1f} s), decode step {row['compiled_over_eager_step']:.2f}x, "
        f"{per_step:.1f} graphs compiled per step while the cache grows")
    torch._dynamo.reset()
    targets = [Target(f"compile {shape}: graph breaks in GPT.forward", float(breaks), "<=", 0.0),
               Target(f"compile {shape}: graph breaks in a cached decode step", float(step_breaks), "<=", 0.0)]
    return {"runs": [row], "targets": [t.to_dict() for t in targets]}


def table(result: dict) -> str:
    rows = [[r["shape"], r["T"], r["graph_breaks_forward"], r["compile_forward_s"], r["compiled_over_eager_forward"],
             r["compile_step_s"], r["compiled_over_eager_step"], r["graphs_compiled_per_growing_step"]]
            for r in result["runs"]]
    return fmt_table(["shape", "T", "graph breaks", "first forward s", "forward compiled/eager", "first step s",
                      "step compiled/eager", "graphs per growing step"], rows)
