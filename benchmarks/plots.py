"""PNG plots of a benchmark JSON (matplotlib, Agg): ``python -m benchmarks.plots results.json outdir``."""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# Okabe-Ito: distinguishable with the common colour-vision deficiencies
COLORS = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
MIB = 2**20


def _title(doc: dict) -> str:
    env = doc["env"]
    return f"{env['device']} ({env['dtype']}, {env['threads']} thread(s)), torch {env['torch']}, {doc['settings']['mode']}"


def attention_plot(doc: dict, path: Path) -> Path:
    res = doc["benchmarks"]["attention"]
    T = [r["T"] for r in res["sizes"]]
    fig, (a, b, c) = plt.subplots(3, 1, figsize=(7.2, 10.5))
    for i, (name, label) in enumerate([("torch_sdpa", "F.scaled_dot_product_attention"),
                                       ("attnlib_sdpa", 'attnlib backend="sdpa"'), ("attnlib_math", 'attnlib backend="math"')]):
        a.plot(T, [r["timing"]["median_s"][name] * 1e3 for r in res["sizes"]], "o-", color=COLORS[i], label=label)
    a.set(xscale="log", yscale="log", xlabel="sequence length T", ylabel="median time per call (ms)", title="time")
    a.legend(fontsize=9)
    b.plot(T, [r["memory"]["attnlib_sdpa"]["peak_bytes"] / MIB for r in res["sizes"]], "o-", color=COLORS[1], label="sdpa peak")
    b.plot(T, [r["memory"]["attnlib_math"]["peak_bytes"] / MIB for r in res["sizes"]], "o-", color=COLORS[2], label="math peak")
    b.plot(T, [2 * r["tt_bytes"] / MIB for r in res["sizes"]], "--", color="grey", label="2 x (B,H,T,T) tensors")
    b.plot(T, [r["out_bytes"] / MIB for r in res["sizes"]], ":", color="grey", label="1 x (B,H,T,D) output")
    b.set(xscale="log", yscale="log", xlabel="sequence length T", ylabel="peak memory above baseline (MiB)",
          title="peak memory (profiler allocator events)")
    b.legend(fontsize=9)
    c.plot(T, [r["overhead"] for r in res["sizes"]], "o-", color=COLORS[1], label="attnlib sdpa / torch sdpa")
    c.plot(T, [r["mask_over_is_causal"] for r in res["causal"]], "s-", color=COLORS[3], label="bool causal mask / is_causal")
    c.plot(T, [r["math_over_sdpa"] for r in res["sizes"]], "^-", color=COLORS[2], label="math / sdpa")
    c.axhline(1.05, color="grey", ls="--", lw=1, label="overhead target 1.05")
    c.axhline(1.0, color="black", lw=0.5)
    c.set(xscale="log", xlabel="sequence length T", ylabel="time ratio (median of rounds)", title="ratios")
    c.legend(fontsize=9)
    for ax in (a, b, c):
        ax.set_xticks(T, [str(t) for t in T])
        ax.minorticks_off()
    fig.suptitle(f"Attention kernel, B=1, H={res['heads']}, D={res['head_dim']}\n" + _title(doc), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def models_plot(doc: dict, path: Path) -> Path:
    runs = doc["benchmarks"]["models"]["runs"]
    labels = [f"{r['shape']}\nT={r['T']}" for r in runs]
    x = range(len(runs))
    fig, (a, b) = plt.subplots(2, 1, figsize=(7.2, 7.6))
    w = 0.38
    a.bar([i - w / 2 for i in x], [r["attnlib_over_hf"] for r in runs], w, color=COLORS[0], label="attnlib / HF sdpa")
    a.bar([i + w / 2 for i in x], [r["eager_over_sdpa"] for r in runs], w, color=COLORS[1], label="HF eager / HF sdpa")
    a.axhline(0.9, color="grey", ls="--", lw=1, label="target 0.9")
    a.axhline(1.0, color="black", lw=0.5)
    a.set(xticks=list(x), xticklabels=labels, ylabel="forward time ratio (lower = faster)", title="forward time vs HF sdpa")
    a.legend(fontsize=9)
    for i, name in enumerate(["hf_sdpa", "attnlib", "hf_eager"]):
        vals = [(r["fraction_of_matmul_peak"] or {}).get(name, 0) for r in runs]
        b.bar([j + (i - 1) * 0.27 for j in x], vals, 0.27, color=COLORS[i], label=name)
    b.set(xticks=list(x), xticklabels=labels, ylabel="GFLOP/s / torch.mm GFLOP/s", title="rate relative to an in-run torch.mm (MKL)")
    b.legend(fontsize=9)
    fig.suptitle("Model forward (B=1)\n" + _title(doc), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def generation_plot(doc: dict, path: Path) -> Path:
    runs = doc["benchmarks"]["generation"]["runs"]
    fig, (a, b) = plt.subplots(2, 1, figsize=(7.2, 7.6))
    x = range(len(runs))
    for i, name in enumerate(["attnlib_no_cache", "attnlib_cache", "hf_cache"]):
        a.bar([j + (i - 1) * 0.27 for j in x], [r["tokens_per_s"][name] for r in runs], 0.27, color=COLORS[i], label=name)
    a.set(xticks=list(x), xticklabels=[f"{r['shape']}\n{r['prompt']}+{r['new']} tokens" for r in runs], yscale="log",
          ylabel="tokens / s (greedy, whole generate call)", title="generation throughput")
    a.legend(fontsize=9)
    for i, r in enumerate(runs):
        steps = r["step_s"]
        w = r["window"]
        first = statistics.median(steps[:w])
        smooth = [statistics.median(steps[max(0, j - w // 2): j + w // 2 + 1]) / first for j in range(len(steps))]
        b.plot(range(1, len(steps) + 1), smooth, color=COLORS[i], label=f"{r['shape']} (running median of {w})")
    b.axhline(1.2, color="grey", ls="--", lw=1, label="flatness target 1.2")
    b.set(xlabel="decode step (new token index)", ylabel="step time / median of first window", title="per-token cost with KVCache")
    b.legend(fontsize=9)
    fig.suptitle("Generation (batch 1)\n" + _title(doc), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def draw_all(doc: dict, outdir: Path) -> list[Path]:
    """Draw a plot per benchmark present in ``doc``; return the paths written."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    device = doc["env"]["device"].split(":")[0]
    mode = doc["settings"]["mode"]
    draw = {"attention": attention_plot, "models": models_plot, "generation": generation_plot}
    # panels stacked at about the page's column width, so the text is readable where it is shown
    with plt.rc_context({"font.size": 10}):
        return [fn(doc, outdir / f"{mode}_{device}_{name}.png") for name, fn in draw.items() if name in doc["benchmarks"]]


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m benchmarks.plots RESULTS.json OUTDIR")
    for p in draw_all(json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2])):
        print(f"wrote {p}")
