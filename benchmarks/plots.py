"""SVG plots of a benchmark JSON (matplotlib, Agg): ``python -m benchmarks.plots results.json outdir``.

One panel per file, 5 inches wide, so the page shows each at its size (and stacked on a phone);
one colour per system in every figure (Okabe-Ito, distinguishable with the common colour-vision
deficiencies).
"""
from __future__ import annotations

import json
import statistics
import sys
from html import escape
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from .report import _shape  # a model's key as the page names it ("tiny" -> "4x256")  # noqa: E402

COLOR = {  # system -> colour, the same in every figure
    "attnlib": "#0072B2",             # attnlib, fused SDPA, with the KV cache
    "attnlib, math path": "#009E73",  # every weight formed
    "attnlib, no cache": "#56B4E9",   # the same forward, everything again at every step
    "HF transformers": "#E69F00",
    "HF, eager attention": "#D55E00",
}
MIB = 2**20
WIDTH, HEIGHT = 5.0, 3.4  # inches


def attention_plots(doc: dict, stem: Path) -> list[Path]:
    res = doc["benchmarks"]["attention"]
    T = [r["T"] for r in res["sizes"]]
    paths = []
    for what, key_fn, ylabel, title in (
        ("time", lambda r, k: r["timing"]["median_s"][k] * 1e3, "ms per call", "Time of one attention call"),
        ("memory", lambda r, k: r["memory"][k]["peak_bytes"] / MIB, "peak memory (MiB)",
         "Peak memory of one attention call"),
    ):
        fig, ax = plt.subplots(figsize=(WIDTH, HEIGHT))
        for name, key, label in (("attnlib", "attnlib_sdpa", "fused SDPA"),
                                 ("attnlib, math path", "attnlib_math", "math path")):
            ax.plot(T, [key_fn(r, key) for r in res["sizes"]], "o-", color=COLOR[name], label=label)
        if what == "memory":
            ax.plot(T, [r["tt_bytes"] / MIB for r in res["sizes"]], "--", color="grey",
                    label="one (B, H, T, T) tensor")
        ax.set(xscale="log", yscale="log", xlabel="sequence length T", ylabel=ylabel, title=title)
        ax.set_xticks(T, [str(t) for t in T])
        ax.minorticks_off()
        ax.legend()
        paths.append(_save(fig, stem.with_name(f"{stem.name}_attention_{what}.svg")))
    return paths


def models_plots(doc: dict, stem: Path) -> list[Path]:
    """Forward time relative to HF's (the median of per-round ratios), on a linear axis from 0; HF
    sdpa, the reference, is the dashed line at 1 (a bar of height 1 would carry no number)."""
    runs = doc["benchmarks"]["models"]["runs"]
    fig, ax = plt.subplots(figsize=(WIDTH, HEIGHT))
    x = list(range(len(runs)))
    w = 0.35
    ax.axhline(1.0, ls="--", lw=1.2, color=COLOR["HF transformers"], label="HF sdpa (= 1)",
               zorder=3)
    for i, (name, label, ratio) in enumerate((("attnlib", "attnlib", lambda r: r["attnlib_over_hf"]),
                                              ("HF, eager attention", "HF eager", lambda r: r["eager_over_sdpa"]))):
        ax.bar([j + (i - 0.5) * w for j in x], [ratio(r) for r in runs], w, color=COLOR[name], label=label)
    ax.set(xticks=x, xticklabels=[_shape(r["shape"]) for r in runs], ylim=(0, 1.45),
           ylabel="time / HF sdpa's time (lower is faster)",
           title=f"One forward over T={runs[0]['T']} tokens, relative to HF sdpa")
    ax.legend(loc="upper center", ncol=3)  # above the bars, which stay near 1
    return [_save(fig, stem.with_name(f"{stem.name}_models.svg"))]


def _per_round(run: dict, num: str, den: str) -> float:
    """The median over kept rounds of time(num) / time(den)."""
    return statistics.median(rd["times_s"][num] / rd["times_s"][den]
                             for rd in run["timing"]["rounds"] if rd["kept"])


def generation_plots(doc: dict, stem: Path) -> list[Path]:
    """Decode speed relative to attnlib without the cache (linear, from 0; that reference is the
    dashed line at 1); each cached step of one generate call relative to that call's median step
    (linear)."""
    runs = doc["benchmarks"]["generation"]["runs"]
    fig, ax = plt.subplots(figsize=(WIDTH, HEIGHT))
    x = list(range(len(runs)))
    w = 0.35
    ax.axhline(1.0, ls="--", lw=1.2, color=COLOR["attnlib, no cache"], label="attnlib, no cache (= 1)",
               zorder=3)
    for i, (name, key, label) in enumerate((("attnlib", "attnlib_cache", "attnlib, cache"),
                                            ("HF transformers", "hf_cache", "HF, cache"))):
        ax.bar([j + (i - 0.5) * w for j in x], [_per_round(r, "attnlib_no_cache", key) for r in runs], w,
               color=COLOR[name], label=label)
    top = max(_per_round(r, "attnlib_no_cache", k) for r in runs for k in ("attnlib_cache", "hf_cache"))
    ax.set(xticks=x, xticklabels=[_shape(r["shape"]) for r in runs], ylim=(0, top * 1.45),  # room for the legend above the bars
           ylabel="tokens/s / attnlib's without cache",
           title=f"Greedy decoding after a {runs[0]['prompt']}-token prompt\nnew tokens: "
                 + ", ".join(f"{r['new']} ({_shape(r['shape'])})" for r in runs))
    # three short columns, clear of the frame and of the axes' right edge
    ax.legend(loc="upper center", ncol=3, columnspacing=0.8, handlelength=1.2, borderaxespad=0.6)
    speed = _save(fig, stem.with_name(f"{stem.name}_generation_speed.svg"))
    fig, ax = plt.subplots(figsize=(WIDTH, HEIGHT))
    for r, style in zip(runs, ("-", "--")):
        steps, win = r["step_s"], r["window"]
        smooth = [statistics.median(steps[max(0, j - win // 2): j + win // 2 + 1]) for j in range(len(steps))]
        middle = statistics.median(steps)
        ax.plot(range(1, len(steps) + 1), [v / middle for v in smooth], style, color=COLOR["attnlib"],
                label=f"{_shape(r['shape'])} (each point: median of {win} steps around it)")
    ax.set(xlabel="new token", ylabel="step time / the loop's median step", ylim=(0, 1.5),
           title="attnlib's cached forward, a hand loop's steps")
    ax.legend(loc="lower right")
    return [speed, _save(fig, stem.with_name(f"{stem.name}_generation_steps.svg"))]


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, metadata={"Date": None})  # SVG, text as text: sharp on any screen, no date
    ax = fig.axes[0]
    title, desc = escape(ax.get_title()), escape(describe(ax))
    svg = path.read_text()
    start = svg.index(">", svg.index("<svg")) + 1  # what a screen reader announces, first inside
    path.write_text(f"{svg[:start]}\n <title>{title}</title>\n <desc>{desc}</desc>{svg[start:]}")
    plt.close(fig)
    return path


def describe(ax) -> str:
    """The plotted numbers in words: each line's first and last value, each bar group's bars."""
    def g(v: float) -> str:
        return f"{v:.3g}"
    parts = [f"{ax.get_ylabel()} against {ax.get_xlabel() or 'model'}"]
    for line in ax.get_lines():
        if not line.get_label().startswith("_"):
            y = line.get_ydata()
            parts.append(f"{line.get_label()}: {g(y[0])} to {g(y[-1])}")
    names = [t.get_text() for t in ax.get_xticklabels()]
    for bars in ax.containers:
        values = ", ".join(f"{n} {g(b.get_height())}" for n, b in zip(names, bars))
        parts.append(f"{bars.get_label()}: {values}")
    return "; ".join(parts) + "."


def draw_all(doc: dict, outdir: Path) -> list[Path]:
    """Draw the plots of every benchmark present in ``doc`` (one panel per SVG file); return the
    paths written: ``<mode>_<device>_<name>.svg``."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    stem = outdir / f"{doc['settings']['mode']}_{doc['env']['device'].split(':')[0]}"
    draw = {"attention": attention_plots, "models": models_plots, "generation": generation_plots}
    # 5 x 3.4 inches at 10 pt: text stays at least 9 px wherever the column is 360 px or wider
    with plt.rc_context({"font.size": 10, "legend.fontsize": 9, "svg.fonttype": "none",
                         "svg.hashsalt": "attnlib"}):
        return [p for name, fn in draw.items() if name in doc["benchmarks"] for p in fn(doc, stem)]


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m benchmarks.plots RESULTS.json OUTDIR")
    for p in draw_all(json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2])):
        print(f"wrote {p}")
