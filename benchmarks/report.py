"""Write the stored results into the book page: ``python -m benchmarks.report [results.json] [page.md]``.

The page's hand-written prose stays; every block between ``<!-- BEGIN generated:NAME -->`` and
``<!-- END generated:NAME -->`` is replaced by tables rendered from the JSON, so the numbers on
the page are always the stored ones (a test re-renders them and compares).
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_JSON = ROOT / "benchmarks" / "results" / "full_cpu.json"
DEFAULT_PAGE = ROOT / "book" / "benchmarks.md"
GPU_JSON = ROOT / "benchmarks" / "results" / "quick_cuda.json"  # written by benchmarks/gpu_run.sh
SMOLLM2_JSON = ROOT / "benchmarks" / "results" / "full_cpu_smollm2.json"  # python -m benchmarks --full --only smollm2
THREADS2_JSON = ROOT / "benchmarks" / "results" / "full_cpu_generation_2threads.json"  # both cores
CROSSOVER_JSON = ROOT / "benchmarks" / "results" / "full_cpu_crossover.json"  # --full --only crossover
COLDOPS_JSON = ROOT / "benchmarks" / "results" / "full_cpu_coldops.json"  # --full --only coldops
NOTEBOOK_TIMES = ROOT / "benchmarks" / "results" / "notebook_times.json"  # scripts/execute_notebooks.py
BLOCK = re.compile(r"(<!-- BEGIN generated:(\w+) -->\n)(.*?)(<!-- END generated:\2 -->)", re.S)
MIB = 2**20


def _num(v: object, digits: int = 3) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}g}"
    return str(v)


def _md_table(headers: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(" --- " for _ in headers) + "|"]
    lines += ["| " + " | ".join(_num(v) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def render_env(doc: dict) -> str:
    env, s, cal = doc["env"], doc["settings"], doc["calibration"]
    stalls = [rd["stall"] for b in _comparisons(doc) for rd in b["rounds"] if rd["stall"] is not None]
    kept = sum(b["kept_rounds"] for b in _comparisons(doc))
    total = sum(len(b["rounds"]) for b in _comparisons(doc))
    noisy = sum(b["noisy"] for b in _comparisons(doc))
    rows = [
        ["run", f"`python -m benchmarks --{s['mode']}{_compile_flag(doc)}` at {env['utc']} ({env['seconds']} s)"],
        ["machine", f"{env['device_name']}, {env['cpu_count']} cores; {env['threads']} thread(s) used"],
        ["software", f"torch {env['torch']}, transformers {env['transformers']}, Python {env['python']}"],
        ["dtype", env["dtype"]],
        ["in-run matmul", f"{cal['matmul']['gflops']:.1f} GFLOP/s ({cal['matmul']['n']}x{cal['matmul']['n']} {env['dtype']})"],
        ["in-run bandwidth", f"{cal['bandwidth']['gbs']:.1f} GB/s, the fastest of: {_probes(cal['bandwidth'])}, "
                             f"{cal['bandwidth']['bytes'] // MIB} MiB"],
        ["rounds", f"{s['rounds']} per comparison after {s['warmup']} warm-up calls; {kept} of {total} rounds kept "
                   f"(stall <= {s['max_stall']:.0%}); {noisy} comparison(s) flagged noisy"],
        ["CPU pressure", f"avg10 {env['cpu_pressure_avg10_start']}% at start, {env['cpu_pressure_avg10_end']}% at end; "
                         f"median round stall {sorted(stalls)[len(stalls) // 2]:.1%}" if stalls else "not available"],
    ]
    return _md_table(["", ""], rows)


def _probes(bw: dict) -> str:
    """The bandwidth probes' rates: copy and read, over 2 MiB pages too where they ran."""
    rates = bw.get("probe_gbs") or {"copy": bw["copy_gbs"], "sum": bw["read_gbs"]}
    names = {"copy": "copy", "sum": "read", "copy_huge": "copy (2 MiB pages)", "sum_huge": "read (2 MiB pages)"}
    return ", ".join(f"{names.get(n, n)} {g:.1f}" for n, g in rates.items())


def _compile_flag(doc: dict) -> str:
    runs = doc["benchmarks"].get("fastpaths", {}).get("runs", [])
    return " --compile" if any(r.get("compile") for r in runs) else ""


def _comparisons(doc: dict) -> list[dict]:
    out = []
    b = doc["benchmarks"]
    for r in b.get("attention", {}).get("sizes", []) + b.get("attention", {}).get("causal", []):
        out.append(r["timing"])
    for r in b.get("models", {}).get("runs", []) + b.get("generation", {}).get("runs", []):
        out.append(r["timing"])
    return out


def render_targets(doc: dict) -> str:
    verdict = {True: "met", False: "**missed**", None: "n/a"}
    rows = [[t["name"], t["value"], f"{t['op']} {t['limit']}", verdict[t["met"]], t["note"]] for t in doc["targets"]]
    return _md_table(["target", "measured", "goal", "", "note"], rows)


def render_attention(doc: dict) -> str:
    """Two narrow tables (time, then memory) and the kernel SDPA chose."""
    att = doc["benchmarks"]["attention"]
    times, mem, kernels = [], [], set()
    for r, c in zip(att["sizes"], att["causal"]):
        m = r["timing"]["median_s"]
        times.append([r["T"], m["torch_sdpa"] * 1e3, r["overhead"], r["math_over_sdpa"], c["mask_over_is_causal"],
                      c["timing"]["ratio"]["torch_bool_mask"] / c["timing"]["ratio"]["torch_is_causal"]])
        mem.append([r["T"], r["memory"]["attnlib_sdpa"]["peak_bytes"] / MIB, r["memory"]["attnlib_math"]["peak_bytes"] / MIB,
                    r["tt_bytes"] / MIB, r["math_peak_in_tt"], c["memory"]["bool_mask"]["peak_bytes"] / MIB])
        kernels.update(r["memory"]["attnlib_sdpa"]["sdpa_kernels"])
    return (_md_table(["T", "torch SDPA ms", "attnlib sdpa / torch", "math / sdpa", "mask / is_causal",
                       "same, torch direct"], times) + "\n"
            + _md_table(["T", "sdpa peak MiB", "math peak MiB", "one TxT MiB", "math peak in TxT",
                         "bool-mask peak MiB"], mem)
            + "\nKernel SDPA ran (from the profiler): " + ", ".join(f"`{k}`" for k in sorted(kernels)) + ".\n")


def render_models(doc: dict) -> str:
    rows = []
    for r in doc["benchmarks"]["models"]["runs"]:
        m, frac = r["timing"]["median_s"], r["fraction_of_matmul_peak"] or {}
        rows.append([r["shape"], r["T"], m["hf_sdpa"] * 1e3, r["attnlib_over_hf"], r["eager_over_sdpa"],
                     r["gflops"]["attnlib"], frac.get("attnlib"), frac.get("hf_sdpa")])
    mm = sorted(r["matmul_gflops"] for r in doc["benchmarks"]["models"]["runs"] if r.get("matmul_gflops"))
    note = f"\nThe in-run `torch.mm` (mm) reached {mm[0]:.0f} to {mm[-1]:.0f} GFLOP/s.\n" if mm else ""
    return _md_table(["shape", "T", "HF ms", "attnlib / HF", "eager / HF", "attnlib GFLOP/s", "attnlib / mm",
                      "HF / mm"], rows) + note


def _profile_lines(runs: list[dict], label, who: tuple[str, str]) -> str:
    out = []
    for r in runs:
        if not r.get("profile"):
            continue
        for w in who:
            prof = r["profile"][w]
            ops = ", ".join(f"`{p['op']}` {p['share']:.0%} ({p['calls']} calls)" for p in prof["top"][:5])
            per = f"{prof['aten_calls'] / r['new']:.0f} aten calls per new token" if "new" in r else \
                f"{prof['aten_calls']} aten calls"
            out.append(f"- {label(r)}, {w} ({per}): {ops}")
    return "\n".join(out) + "\n"


def render_profile(doc: dict) -> str:
    return _profile_lines(doc["benchmarks"]["models"]["runs"], lambda r: f"{r['shape']} T={r['T']}", ("attnlib", "hf_sdpa"))


def render_gen_profile(doc: dict) -> str:
    return _profile_lines(doc["benchmarks"]["generation"]["runs"], lambda r: f"{r['shape']} {r['prompt']}+{r['new']}",
                          ("attnlib_cache", "hf_cache"))


def render_generation(doc: dict) -> str:
    """Speed, then cost per token (two narrow tables)."""
    speed, cost, nbytes = [], [], []
    for r in doc["benchmarks"]["generation"]["runs"]:
        t, run = r["tokens_per_s"], f"{r['shape']} {r['prompt']}+{r['new']}"
        speed.append([run, t["attnlib_no_cache"], t["attnlib_cache"], t["hf_cache"], r["cache_speedup"],
                      r["attnlib_over_hf_tok_s"]])
        cost.append([run, r["last_over_first_window"], r["decode_gbs"], r.get("bandwidth_gbs"), r["fraction_of_bandwidth"],
                     r.get("products_over_step"), r.get("products_fraction_of_bandwidth")])
        nbytes.append(f"{run}: {r['kv_cache']['nbytes']:,} = {r['kv_cache']['formula']:,}")
    return (_md_table(["run", "no-cache tok/s", "KVCache tok/s", "HF tok/s", "cache speedup", "attnlib / HF tok/s"],
                      speed) + "\n"
            + _md_table(["run", "last / first", "decode GB/s", "probe GB/s", "step of probe", "products / step",
                         "products of probe"], cost)
            + "\n`KVCache.nbytes` after the loop = the formula: " + "; ".join(nbytes) + ".\n")


def render_generation_threads(doc: dict) -> str:
    """The generation benchmark again with both of the machine's cores (its own JSON:
    ``python -m benchmarks --full --only generation --threads 2 --out <THREADS2_JSON>``)."""
    if not THREADS2_JSON.exists():
        return ("*No two-thread run stored*: `python -m benchmarks --full --only generation --threads 2 "
                f"--out benchmarks/results/{THREADS2_JSON.name}` writes it.\n")
    two = json.loads(THREADS2_JSON.read_text())
    env, cal = two["env"], two["calibration"]
    verdict = {True: "met", False: "**missed**", None: "n/a"}
    rows = [[t["name"], t["value"], f"{t['op']} {t['limit']}", verdict[t["met"]]] for t in two["targets"]]
    return (f"Run at {env['utc']} ({env['seconds']} s), `--{two['settings']['mode']} --only generation "
            f"--threads {env['threads']}`; in-run matmul {cal['matmul']['gflops']:.0f} GFLOP/s, "
            f"bandwidth {cal['bandwidth']['gbs']:.1f} GB/s ({cal['bandwidth']['bytes'] // MIB} MiB).\n\n"
            + render_generation(two) + "\n" + _md_table(["target", "measured", "goal", ""], rows))


def render_crossover(doc: dict) -> str:
    """oneDNN / F.linear per product size, weight in cache or streamed, per thread count."""
    if not CROSSOVER_JSON.exists():
        return "*No crossover run stored*: `python -m benchmarks --full --only crossover` writes it.\n"
    cx = json.loads(CROSSOVER_JSON.read_text())
    runs = cx["benchmarks"]["crossover"]["runs"]
    threads = sorted({r["threads"] for r in runs})
    cols = [(w, n) for w in ("in cache", "streamed") for n in threads]
    table: dict[tuple, dict] = {}
    for r in runs:
        key = (r["macs"], r["rows"], r["in"], r["out"])
        table.setdefault(key, {})[(r["where"], r["threads"])] = r["onednn_over_f_linear"]
    # "1×768→2304": a browser does not break the line inside it (it did at the hyphen of "->")
    rows = [[f"{m}\u00d7{i}\u2192{o}", f"{macs:,}"] + [table[(macs, m, i, o)].get(c) for c in cols]
            for (macs, m, i, o) in sorted(table)]
    # the streamed one-row products: each kernel's share of the read rate (a sum of the same bytes)
    reads = sorted((r["macs"], r["in"], r["out"], r["threads"], r["fraction_of_read"])
                   for r in runs if "fraction_of_read" in r)
    read_table = "" if not reads else (
        "\nStreamed one-row products, as a fraction of the rate at which a sum reads the same bytes "
        "(`linear_t`: W^T with its rows split into one bag per thread; `RowBlocks`: W^T in column "
        "blocks, what `FastDecoder` holds for a large model):\n\n"
        + _md_table(["1×in→out", "threads", "F.linear", "oneDNN", "linear_t", "RowBlocks"],
                    [[f"{i}\u2192{o}", n, f["f_linear"], f["onednn"], f["linear_t"], f.get("row_blocks")]
                     for _, i, o, n, f in reads]) + "\n")
    # RowBlocks at other block widths, on the largest shape (the evidence for BLOCK_COLS)
    widths = sorted({int(k.rsplit("_", 1)[1]) for *_, f in reads for k in f if k.startswith("row_blocks_")}
                    | {cx["benchmarks"]["crossover"].get("block_cols", 0)} - {0})
    sweep = [r for r in runs if any(k.startswith("row_blocks_") for k in r.get("fraction_of_read", {}))]
    if sweep and widths:
        bc = cx["benchmarks"]["crossover"]["block_cols"]
        read_table += (
            f"\nThe same for `RowBlocks` with blocks of about this many columns (`BLOCK_COLS` = {bc}):\n\n"
            + _md_table(["1×in→out", "threads"] + [f"{w} cols" for w in widths],
                        [[f"{r['in']}\u2192{r['out']}", r["threads"]]
                         + [r["fraction_of_read"]["row_blocks" if w == bc else f"row_blocks_{w}"] for w in widths]
                         for r in sweep]) + "\n")
    verdict = {True: "met", False: "**missed**", None: "n/a"}
    targets = [[t["name"].split(": ", 1)[-1], t["value"], f"{t['op']} {t['limit']}", verdict[t["met"]]]
               for t in cx["targets"]]
    names = [t["name"].split(": ", 1)[0] for t in cx["targets"]]
    return (f"Run at {cx['env']['utc']}, `--{cx['settings']['mode']} --only crossover`; bounds "
            f"`MIN_MACS` = {cx['benchmarks']['crossover']['min_macs']:,}, `MIN_MACS_STREAMED` = "
            f"{cx['benchmarks']['crossover']['min_macs_streamed']:,}. oneDNN's time over F.linear's:\n\n"
            + _md_table(["rows×in→out", "MACs"] + [f"{w}, {n} thr." for w, n in cols], rows) + read_table + "\n"
            + _md_table(["run", "check", "measured", "goal", ""],
                        [[n] + t for n, t in zip(names, targets)]))


def render_coldops(doc: dict) -> str:
    """The operations between a decode step's products, warm and cold (its own JSON)."""
    if not COLDOPS_JSON.exists():
        return "*No cold-ops run stored*: `python -m benchmarks --full --only coldops` writes it.\n"
    co = json.loads(COLDOPS_JSON.read_text())
    rows = [[r["shape"], r["cache_len"], r["step_ms"], r["warm_ms"], r["cold_ms"], r["parts_ms"]["attention"],
             r["parts_ms"]["cache_write"], r["parts_ms"]["norms"], r["parts_ms"]["activation"]]
            for r in co["benchmarks"]["coldops"]["runs"]]
    return (f"Run at {co['env']['utc']}, `--{co['settings']['mode']} --only coldops`, "
            f"{co['settings']['threads']} thread, {co['settings']['rounds']} rounds; milliseconds per step.\n\n"
            + _md_table(["shape", "cache tokens", "step", "other ops warm", "other ops cold", "attention",
                         "cache writes", "norms", "GELU"], rows)
            + "\nChecked: " + "; ".join(f"{t['name']} {t['op']} {t['limit']}: {_num(t['value'])}, "
                                       f"{ {True: 'met', False: 'missed'}.get(t['met'], 'n/a')}"
                                       for t in co["targets"]) + ".\n")


def render_fastpaths(doc: dict) -> str:
    fp = doc["benchmarks"].get("fastpaths")
    if fp is None:
        return ("*Not in the stored run* (it predates the fast paths): `python -m benchmarks --quick` "
                "measures them; store a run from a quiet machine.\n")
    kernels = [[r["shape"], r["T"], r["cache_len"], r["fused_over_unfused"], r["preallocated_over_concat"],
                r.get("onednn_over_f_linear"), r.get("big_result_over_f_linear"),
                r["compile"]["ratio"]["compiled"] if r.get("compile") else "not run"] for r in fp["runs"]]
    steps = [[r["shape"], r["cache_len"], r.get("onednn_step_over_f_linear_step"), r.get("mm_over_bags_step"),
              r.get("small_gelu_over_f_gelu")] for r in fp["runs"]]
    python = [[r["shape"], r["cache_len"], r["overhead"]["median_s"]["raw_sdpa_loop"] * 1e3, r["attnlib_over_raw_step"],
               r.get("generate_loop_over_raw_step"), r.get("generate_loop_us_per_token")] for r in fp["runs"]]
    return (_md_table(["shape", "T", "cache", "fused / 3 linears", "prealloc / concat", "oneDNN / F.linear fwd",
                       "LM head, huge pages / F.linear", "compiled / eager"], kernels) + "\n"
            + _md_table(["shape", "cache tokens", "decode step, attnlib kernels / F.linear",
                         "decode step, 1-token mm W^T / bags", "GELU of one row, kernels.gelu / F.gelu"], steps) + "\n"
            + _md_table(["shape", "cache tokens", "raw loop step ms", "forward step / raw", "generate step / raw",
                         "generate - raw, us"], python))


def render_smollm2(doc: dict) -> str:
    """The SmolLM2 run (its own JSON: it needs the model package and is not in the default set)."""
    if not SMOLLM2_JSON.exists():
        return "*No SmolLM2 run stored*: `python -m benchmarks --full --only smollm2` writes it.\n"
    sm = json.loads(SMOLLM2_JSON.read_text())
    rows = [[f"{r['prompt']}+{r['new']}", r["tokens_per_s"]["attnlib_cache"], r["tokens_per_s"]["hf_generate"],
             r["attnlib_over_hf_tok_s"], f"{r['agreement']:.0%}", r["decode_gbs"]] for r in sm["benchmarks"]["smollm2"]["runs"]]
    verdict = {True: "met", False: "**missed**"}
    targets = "; ".join(f"{x['name'].split(': ', 1)[-1]} {x['op']} {x['limit']}: {_num(x['value'])}, "
                        f"{verdict.get(x['met'], 'n/a')}" for x in sm["targets"])
    return (f"Run at {sm['env']['utc']}, `--{sm['settings']['mode']}`, {sm['settings']['threads']} thread, "
            f"{sm['settings']['rounds']} rounds.\n\n"
            + _md_table(["prompt+new", "attnlib tok/s", "HF tok/s", "attnlib / HF", "same tokens", "decode GB/s"], rows)
            + f"\nTargets: {targets}.\n")


def render_chapters(doc: dict) -> str:
    """Per-notebook execution times recorded by scripts/execute_notebooks.py."""
    if not NOTEBOOK_TIMES.exists():
        return "*No execution times recorded*: run `python scripts/execute_notebooks.py`.\n"
    times = json.loads(NOTEBOOK_TIMES.read_text())
    rows = [[name, t["seconds"], t["utc"][:10], f"{t['cores']} cores"] for name, t in times.items()]
    total = sum(t["seconds"] for t in times.values())
    return _md_table(["notebook", "seconds", "run on", "machine"], rows) + f"\nAll {len(times)}: {total:.0f} s.\n"


def render_gpu(doc: dict) -> str:
    """The GPU run written by ``benchmarks/gpu_run.sh`` (its own JSON), or a note that none ran yet."""
    if not GPU_JSON.exists():
        return "*No GPU run stored yet*: `bash benchmarks/gpu_run.sh` on a CUDA machine writes it.\n"
    return render_gpu_doc(json.loads(GPU_JSON.read_text()))


def render_gpu_doc(gpu: dict) -> str:
    """Kernel, training TFLOP/s and MFU, decode tokens/s and the targets of one (GPU) run."""
    rows = [[t["name"], t["value"], f"{t['op']} {t['limit']}", t["met"]] for t in gpu.get("targets", [])]
    out = f"Device: {gpu['env'].get('device_name', gpu['env'].get('device'))}, {gpu['settings']['dtype']}.\n\n"
    att = gpu["benchmarks"].get("attention", {}).get("sizes", [])
    if att:
        out += _md_table(["T", "SDPA kernel"], [[r["T"], ", ".join(f"`{k}`" for k in
                                                               r["memory"]["attnlib_sdpa"]["sdpa_kernels"])] for r in att]) + "\n"
    ts = gpu["benchmarks"].get("models", {}).get("train_step")
    if ts:
        out += _md_table(["train step", "s", "TFLOP/s", "MFU"],
                         [[k, ts[k]["step_s"], ts[k]["tflops"], ts[k]["mfu"]] for k in ("eager", "compiled")
                          if k in ts]) + "\n"
    gen = gpu["benchmarks"].get("generation", {}).get("runs", [])
    if gen:
        out += _md_table(["shape", "decode tok/s", "attnlib / HF tok/s"],
                         [[r["shape"], r["decode_tok_s"], r["attnlib_over_hf_tok_s"]] for r in gen]) + "\n"
    return out + _md_table(["target", "measured", "goal", "met"], rows)


RENDER = {"env": render_env, "targets": render_targets, "attention": render_attention, "models": render_models,
          "profile": render_profile, "generation": render_generation,
          "gen_profile": render_gen_profile, "generation_threads": render_generation_threads,
          "crossover": render_crossover, "coldops": render_coldops,
          "fastpaths": render_fastpaths, "gpu": render_gpu,
          "smollm2": render_smollm2, "chapters": render_chapters}


def render_page(page: str, doc: dict) -> str:
    """``page`` with every generated block re-rendered from ``doc``."""
    names = [m.group(2) for m in BLOCK.finditer(page)]
    unknown = [n for n in names if n not in RENDER]
    if unknown:
        raise ValueError(f"unknown generated block(s) {unknown}; known: {list(RENDER)}")
    return BLOCK.sub(lambda m: m.group(1) + "\n" + RENDER[m.group(2)](doc) + "\n" + m.group(4), page)


def main(argv: list[str]) -> int:
    src = Path(argv[0]) if argv else DEFAULT_JSON
    page_path = Path(argv[1]) if len(argv) > 1 else DEFAULT_PAGE
    doc = json.loads(src.read_text())
    page_path.write_text(render_page(page_path.read_text(), doc))
    print(f"updated {page_path} from {src}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
