"""PNG plots of a benchmark JSON (matplotlib, Agg): ``python -m benchmarks.plots results.json outdir``.

One colour per system in every figure (Okabe-Ito, distinguishable with the common colour-vision
deficiencies), drawn at the book column's width with 2x pixels.
"""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLOR = {  # system -> colour, the same in every figure
    "attnlib": "#0072B2",             # attnlib, fused SDPA, with the KV cache
    "attnlib, math path": "#009E73",  # every weight formed
    "attnlib, no cache": "#56B4E9",   # the same forward, everything again at every step
    "HF transformers": "#E69F00",
    "HF, eager attention": "#D55E00",
}
MIB = 2**20
WIDTH = 6.8  # inches: the page's column at 100 dpi


def _title(doc: dict) -> str:
    env = doc["env"]
    return f"{env['device_name']}, {env['threads']} thread(s), {env['dtype']}"


def attention_plot(doc: dict, path: Path) -> Path:
    res = doc["benchmarks"]["attention"]
    T = [r["T"] for r in res["sizes"]]
    fig, (a, b) = plt.subplots(2, 1, figsize=(WIDTH, 7.0))
    for name, key in (("attnlib", "attnlib_sdpa"), ("attnlib, math path", "attnlib_math")):
        a.plot(T, [r["timing"]["median_s"][key] * 1e3 for r in res["sizes"]], "o-", color=COLOR[name],
               label=name.replace("attnlib", "fused SDPA") if key == "attnlib_sdpa" else "math path")
        b.plot(T, [r["memory"][key]["peak_bytes"] / MIB for r in res["sizes"]], "o-", color=COLOR[name],
               label=("fused SDPA" if key == "attnlib_sdpa" else "math path") + ", peak")
    b.plot(T, [r["tt_bytes"] / MIB for r in res["sizes"]], "--", color="grey", label="one (B, H, T, T) tensor")
    a.set(xscale="log", yscale="log", xlabel="sequence length T", ylabel="ms per call", title="Time")
    b.set(xscale="log", yscale="log", xlabel="sequence length T", ylabel="peak memory (MiB)", title="Peak memory")
    for ax in (a, b):
        ax.set_xticks(T, [str(t) for t in T])
        ax.minorticks_off()
        ax.legend(fontsize=9)
    fig.suptitle(f"Attention, B=1, H={res['heads']}, D={res['head_dim']}: " + _title(doc), fontsize=10)
    return _save(fig, path)


def models_plot(doc: dict, path: Path) -> Path:
    runs = doc["benchmarks"]["models"]["runs"]
    fig, ax = plt.subplots(figsize=(WIDTH, 3.6))
    x = list(range(len(runs)))
    w = 0.27
    for i, (name, key) in enumerate((("HF transformers", "hf_sdpa"), ("attnlib", "attnlib"),
                                     ("HF, eager attention", "hf_eager"))):
        ax.bar([j + (i - 1) * w for j in x], [r["timing"]["median_s"][key] * 1e3 for r in runs], w,
               color=COLOR[name], label=name)
    ax.set(xticks=x, xticklabels=[f"{r['shape']}, T={r['T']}" for r in runs], yscale="log",
           ylabel="ms per forward (lower is faster)", title="One forward pass, same weights: " + _title(doc))
    ax.title.set_fontsize(10)
    ax.legend(fontsize=9)
    return _save(fig, path)


def generation_plot(doc: dict, path: Path) -> Path:
    runs = doc["benchmarks"]["generation"]["runs"]
    fig, (a, b) = plt.subplots(2, 1, figsize=(WIDTH, 7.0))
    x = list(range(len(runs)))
    w = 0.27
    for i, (name, key) in enumerate((("attnlib, no cache", "attnlib_no_cache"), ("attnlib", "attnlib_cache"),
                                     ("HF transformers", "hf_cache"))):
        a.bar([j + (i - 1) * w for j in x], [r["tokens_per_s"][key] for r in runs], w, color=COLOR[name],
              label=name + (", with a cache" if key != "attnlib_no_cache" else ""))
    a.set(xticks=x, xticklabels=[f"{r['shape']}, {r['prompt']}+{r['new']} tokens" for r in runs], yscale="log",
          ylabel="tokens per second", title="Greedy generation (higher is faster)")
    a.legend(fontsize=9)
    for r, style in zip(runs, ("-", "--")):
        steps, win = r["step_s"], r["window"]
        smooth = [statistics.median(steps[max(0, j - win // 2): j + win // 2 + 1]) * 1e3 for j in range(len(steps))]
        b.plot(range(1, len(steps) + 1), smooth, style, color=COLOR["attnlib"], label=f"{r['shape']}")
    b.set(xlabel="new token", ylabel="ms per decode step", yscale="log",
          title=f"Cost of each step with the cache (running median of {runs[0]['window']})")
    b.legend(fontsize=9)
    fig.suptitle(_title(doc), fontsize=10)
    return _save(fig, path)


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=200)  # 2x the page's 100 dpi: sharp on high-density screens
    plt.close(fig)
    return path


def draw_all(doc: dict, outdir: Path) -> list[Path]:
    """Draw a plot per benchmark present in ``doc``; return the paths written."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    device = doc["env"]["device"].split(":")[0]
    mode = doc["settings"]["mode"]
    draw = {"attention": attention_plot, "models": models_plot, "generation": generation_plot}
    with plt.rc_context({"font.size": 10}):
        return [fn(doc, outdir / f"{mode}_{device}_{name}.png") for name, fn in draw.items() if name in doc["benchmarks"]]


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m benchmarks.plots RESULTS.json OUTDIR")
    for p in draw_all(json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2])):
        print(f"wrote {p}")
