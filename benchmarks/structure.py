"""What the model's structure costs: ``GPT.generate`` against a plain cached loop.

The yardstick (DESIGN.md, revised 2026-12-03) is ``benchmarks.reference.functional_generate``,
the *plain loop*: greedy decoding as one function (33 lines from ``def`` to ``return``; DESIGN.md
still calls it "25-line", its length when first written) of ``F.linear``, ``F.layer_norm``,
``F.scaled_dot_product_attention`` and a ``torch.cat`` cache over the very weights of the model,
with no module, no check and no cache object. Whatever ``GPT.generate`` takes beyond it is the
price of the library's structure (modules, the checks at the door, the cache object, the output
record), measured side by side in one run, one thread, paired rounds, on the same prompt; both
pick the same tokens (checked).

Two models: the shipped tiny GPT (chapter 10's; 16-token prompt, 48 new tokens), where a step's
arithmetic is tiny and Python's share is largest, and a d=256, 4-layer GPT-2 layout (the
``tiny`` shape of ``benchmarks.models``), where the arithmetic starts to dominate. The
nanoGPT-style modules (``benchmarks.reference.NanoGPT``) run in the same rounds for scale.
Also counted: the distinct attnlib lines one cached decode step executes (a trace), held to
``MAX_LINES`` as issue 43 asked.

Where each tensor lands in memory moves a ratio between processes more than within one (on the
d=256 model, 1.02 to 1.11 in six fresh processes of the same code, the nanoGPT-style modules 0.94
to 1.08): ``quick`` and ``full`` therefore time each model in several fresh processes and report
the process whose ratio is the median, with every process's ratio beside it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict

import torch

import attnlib

from .harness import Settings, Target, compare, fmt_table
from .models import build_pair
from .reference import NanoGPT, functional_generate

# (model, prompt tokens, new tokens) per mode
RUNS = {
    "smoke": [("shipped", 8, 8)],
    "quick": [("shipped", 16, 48), ("tiny", 32, 64)],
    "full": [("shipped", 16, 48), ("tiny", 32, 128)],
}
LIMITS = {"shipped": 1.30, "tiny": 1.05}  # GPT.generate time / the loop's time
MAX_LINES = 100
PROCESSES = {"smoke": 1, "quick": 3, "full": 5}  # fresh processes per model (odd: a median one)


def lines_per_step(model: torch.nn.Module, prompt: torch.Tensor) -> tuple[int, int]:
    """(distinct attnlib lines, files) that one cached decode step executes, traced."""
    root = os.path.dirname(attnlib.__file__)
    seen: set = set()

    def tracer(frame, event, arg):
        if not frame.f_code.co_filename.startswith(root):
            return None  # not attnlib: do not trace inside it
        if event == "line":
            seen.add((frame.f_code.co_filename, frame.f_lineno))
        return tracer

    cache = attnlib.KVCache()
    with torch.inference_mode():
        model(prompt, cache=cache)
        model(prompt[:, -1:], cache=cache, logits_to_keep=1)  # a first step, untraced
        sys.settrace(tracer)
        try:
            model(prompt[:, -1:], cache=cache, logits_to_keep=1)
        finally:
            sys.settrace(None)
    return len(seen), len({f for f, _ in seen})


def _model(shape: str, settings: Settings) -> torch.nn.Module:
    if shape == "shipped":
        model, _ = attnlib.load_tiny_gpt()
        return model.to(settings.device, settings.torch_dtype)
    gpt, _, _ = build_pair(shape, settings)
    return gpt


def time_one(shape: str, prompt_len: int, new: int, settings: Settings) -> dict:
    """compare() of GPT.generate, the loop and the nanoGPT-style modules, in this process."""
    gpt = _model(shape, settings)
    g = torch.Generator().manual_seed(settings.seed)
    prompt = torch.randint(0, gpt.cfg.vocab_size, (1, prompt_len), generator=g).to(settings.device)
    nano = NanoGPT(gpt).eval()
    variants = {
        "loop": lambda: functional_generate(gpt, prompt, new),
        "attnlib": lambda: gpt.generate(prompt, new, temperature=0.0),
        "nanogpt_modules": lambda: nano.generate(prompt, new),
    }
    with torch.inference_mode():
        outs = {name: fn() for name, fn in variants.items()}
    same = {name: bool(torch.equal(ids, outs["attnlib"])) for name, ids in outs.items()}
    if not all(same.values()):
        raise AssertionError(f"{shape}: the loops chose other tokens than GPT.generate: {same}")
    return compare(variants, settings, baseline="loop")


def time_in_processes(shape: str, prompt_len: int, new: int, settings: Settings) -> dict:
    """time_one in PROCESSES[mode] fresh processes: the median process's result (by GPT.generate's
    ratio), with ``processes``, every process's ratios, added."""
    k = PROCESSES[settings.mode]
    if k == 1:
        return time_one(shape, prompt_len, new, settings)
    job = json.dumps([shape, prompt_len, new, asdict(settings)])
    results = []
    for _ in range(k):
        done = subprocess.run([sys.executable, "-m", "benchmarks.structure", job], check=True,
                              capture_output=True, text=True, cwd=os.path.dirname(os.path.dirname(
                                  os.path.abspath(__file__))))
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    results.sort(key=lambda r: r["ratio"]["attnlib"])
    median = dict(results[k // 2])
    median["processes"] = [r["ratio"] for r in results]
    return median


def run(settings: Settings, *, log=print) -> dict:
    """Time GPT.generate against the loop; return JSON-ready results and targets."""
    rows = []
    for shape, prompt_len, new in RUNS[settings.mode]:
        res = time_in_processes(shape, prompt_len, new, settings)
        gpt = _model(shape, settings)
        cfg = gpt.cfg
        g = torch.Generator().manual_seed(settings.seed)
        prompt = torch.randint(0, cfg.vocab_size, (1, prompt_len), generator=g).to(settings.device)
        n_lines, n_files = lines_per_step(gpt, prompt)
        rows.append({
            "shape": shape, "prompt": prompt_len, "new": new,
            "config": {k: getattr(cfg, k) for k in ("vocab_size", "d_model", "n_heads", "n_layers")},
            "timing": res, "tokens_per_s": {n: new / t for n, t in res["median_s"].items()},
            "attnlib_over_loop": res["ratio"]["attnlib"],
            "nanogpt_over_loop": res["ratio"]["nanogpt_modules"],
            "lines_per_step": n_lines, "files_per_step": n_files,
        })
        r = rows[-1]
        spread = ""
        if "processes" in res:
            each = sorted(p["attnlib"] for p in res["processes"])
            spread = f" (median of {len(each)} processes: {each[0]:.3f}-{each[-1]:.3f})"
        log(f"  {shape} {prompt_len}+{new}: generate / loop {r['attnlib_over_loop']:.3f}x{spread}, "
            f"nanoGPT modules / loop {r['nanogpt_over_loop']:.3f}x, a step runs {n_lines} lines "
            f"in {n_files} files{' (noisy)' if res['noisy'] else ''}")
    targets = []
    for r in rows:
        tag = f"structure {r['shape']} {r['prompt']}+{r['new']}"
        if r["shape"] in LIMITS:
            # named "25-line loop" in runs stored before 2026-12-05 (benchmarks.report.LABELS)
            targets.append(Target(f"{tag}: GPT.generate time / plain loop time",
                                  r["attnlib_over_loop"], "<=", LIMITS[r["shape"]],
                                  "one thread, paired rounds, the same tokens"))
        targets.append(Target(f"{tag}: distinct attnlib lines per cached decode step",
                              float(r["lines_per_step"]), "<=", float(MAX_LINES)))
    return {"runs": rows, "targets": [t.to_dict() for t in targets]}


def table(result: dict) -> str:
    """Medians and ratios as plain text."""
    rows = [[r["shape"], f"{r['prompt']}+{r['new']}", r["tokens_per_s"]["loop"],
             r["tokens_per_s"]["attnlib"], r["tokens_per_s"]["nanogpt_modules"],
             r["attnlib_over_loop"], r["nanogpt_over_loop"], r["lines_per_step"]]
            for r in result["runs"]]
    return fmt_table(["model", "prompt+new", "loop tok/s", "generate tok/s", "nanoGPT tok/s",
                      "generate / loop", "nanoGPT / loop", "lines per step"], rows)


if __name__ == "__main__":  # one fresh process of time_in_processes: JSON on the last line
    shape, prompt_len, new, fields = json.loads(sys.argv[1])
    print(json.dumps(time_one(shape, prompt_len, new, Settings(**fields))))
