"""Re-execute notebooks in place in a fresh kernel, storing outputs and widget state.

    python scripts/execute_notebooks.py                 # every notebooks/*.ipynb and book/*.ipynb
    python scripts/execute_notebooks.py notebooks/04_scaled_dot_product_attention.ipynb
    python scripts/execute_notebooks.py --jobs 2        # two kernels at once, longest first

This is the only way notebooks' outputs are regenerated (never hand-save from JupyterLab: it can
keep stale widget state). Each notebook runs with its own folder as the working directory.

Each notebook's wall time is printed and recorded in ``benchmarks/results/notebook_times.json``
(one entry per notebook, replaced when it is run again); the benchmarks page's generated blocks
are then re-rendered (``python -m benchmarks.report``) so that the page shows them.

With ``--jobs N`` (N > 1) N kernels run at once, the slowest recorded notebooks first, so the whole
book uses every core; each notebook still runs alone in its own kernel, in order, from the top. The
run's wall time goes to ``benchmarks/results/book_execution.json``; the per-notebook times are
recorded only by a run with one job, where no notebook shares the machine with another.

The kernels run with AVX2 as the widest vector instructions (``STORED_KERNELS``: PyTorch's own
kernels, MKL's and oneDNN's matrix products), the set the stored outputs were computed with. Training
amplifies the last bits in which kernel sets differ, so a trained chapter re-executed with AVX-512
kernels prints other losses than its prose quotes; pinned, any x86 machine with AVX2 reproduces the
stored run (checked: chapters 10, 12 and 13 on an AVX-512 EPYC, every output but the clock
readings). ``--native-kernels`` lets each library pick its own. Elsewhere (no AVX2) nothing is set.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
TIMES = ROOT / "benchmarks" / "results" / "notebook_times.json"
BOOK_RUN = ROOT / "benchmarks" / "results" / "book_execution.json"  # the last whole-book run


KERNEL = "python3"
STORED_KERNELS = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
                  "ONEDNN_MAX_CPU_ISA": "AVX2"}  # see the module docstring


def pin_kernels() -> dict[str, str]:
    """Set STORED_KERNELS in this process's environment (the kernels inherit it) where the CPU has
    AVX2 and the variable is not set already; returns what was set."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:  # not Linux: leave the kernels as they are
        return {}
    if " avx2" not in flags:
        return {}
    pinned = {k: v for k, v in STORED_KERNELS.items() if k not in os.environ}
    os.environ.update(pinned)
    return pinned


def kernelspec(name: str = KERNEL) -> dict[str, str]:
    """The notebook metadata JupyterLab writes for this kernel. A notebook whose stored kernelspec
    differs (nbclient keeps whatever was there, e.g. display name "Python 3" where ipykernel's is
    "Python 3 (ipykernel)") opens in JupyterLab already marked as modified."""
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec(name)
    return {"display_name": spec.display_name, "language": spec.language, "name": name}


def execute(path: Path, timeout: int = 600) -> float:
    nb = nbformat.read(path, as_version=4)
    # Start clean: nbclient only writes metadata.widgets when the run creates widgets, so a chapter
    # that dropped its last widget would keep the old state; and no output may survive a re-run.
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    start = time.perf_counter()
    client = NotebookClient(
        nb, timeout=timeout, kernel_name=KERNEL, resources={"metadata": {"path": str(path.parent)}},
        store_widget_state=True,
    )
    client.execute()
    nb.metadata["kernelspec"] = kernelspec()
    nbformat.write(nb, path)
    return time.perf_counter() - start


def record(times: dict[str, float]) -> None:
    """Merge this run's times into TIMES: {notebook: {seconds, utc, cpu, cores}}."""
    doc = json.loads(TIMES.read_text()) if TIMES.exists() else {}
    utc = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    for name, seconds in times.items():
        doc[name] = {"seconds": round(seconds, 1), "utc": utc, "cpu": platform.processor() or platform.machine(),
                     "cores": os.cpu_count()}
    TIMES.parent.mkdir(parents=True, exist_ok=True)
    TIMES.write_text(json.dumps(dict(sorted(doc.items())), indent=1) + "\n")
    # the benchmarks page shows these times: re-render its generated blocks so it stays current
    sys.path.insert(0, str(ROOT))
    from benchmarks.report import DEFAULT_JSON, main as render_report

    if DEFAULT_JSON.exists():
        render_report([])


def run(paths: list[Path], jobs: int) -> dict[str, float]:
    """Execute ``paths``, ``jobs`` at a time, the slowest recorded first; {name: seconds}."""
    if jobs == 1:
        times = {}
        for p in paths:
            print(f"executing {p} ...", flush=True)
            times[p.name] = execute(p.resolve())
            print(f"  done in {times[p.name]:.1f} s", flush=True)
        return times
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # Two kernels share the cores: an OpenMP thread that waits for work sleeps instead of
    # spinning, or a chapter's two-thread matrix products stall behind the other kernel's work
    # (measured: chapter 16 ran 5x slower beside another kernel with spinning threads).
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    recorded = json.loads(TIMES.read_text()) if TIMES.exists() else {}
    paths = sorted(paths, key=lambda p: -recorded.get(p.name, {}).get("seconds", 0.0))
    with ProcessPoolExecutor(jobs) as pool:
        running = {pool.submit(execute, p.resolve()): p for p in paths}
        times = {}
        for done in as_completed(running):
            name = running[done].name
            times[name] = done.result()  # a failed cell raises here, naming the notebook's error
            print(f"  {name} done in {times[name]:.1f} s", flush=True)
    return times


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, help="notebooks (default: all)")
    parser.add_argument("--jobs", type=int, default=1, help="kernels at once (default 1)")
    parser.add_argument("--native-kernels", action="store_true",
                        help="do not pin AVX2 kernels (the stored outputs' set; see above)")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    if not args.native_kernels:
        pinned = pin_kernels()
        if pinned:
            print("kernels pinned as in the stored run: " + ", ".join(f"{k}={v}" for k, v in pinned.items()))
    paths = args.paths or [*sorted((ROOT / "notebooks").glob("*.ipynb")),
                           *sorted((ROOT / "book").glob("*.ipynb"))]  # the playground
    start = time.perf_counter()
    times = run(paths, args.jobs)
    wall = time.perf_counter() - start
    if args.jobs == 1:
        record(times)
    if len(times) > 1:  # the numbers book/how_to_use.md quotes ("Restart and run all" per chapter)
        print(f"{len(times)} notebooks in {wall:.0f} s with {args.jobs} job(s); per notebook "
              f"{min(times.values()):.0f} to {max(times.values()):.0f} s")
    if not args.paths:
        BOOK_RUN.write_text(json.dumps({
            "wall_seconds": round(wall, 1), "jobs": args.jobs, "notebooks": len(times),
            "utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
