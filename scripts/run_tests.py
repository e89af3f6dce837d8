"""Run every test of the project, step by step, and say which steps failed (`make test`).

    python scripts/run_tests.py                # all steps
    python scripts/run_tests.py unit book      # some steps

Steps (each a separate pytest run, all run even if one fails; the exit code is 1 if any failed):
  unit       tests/ (the library, the explorer, benchmarks), without the book tests below
  notebooks  pytest --nbval: every chapter and the two computing pages (the Playground, the
             SmolLM2 lab) re-run in a fresh kernel, outputs compared (two at a time on a
             machine with two cores or more, the slowest first)
  notebooks-default
             the same under ATEN_CPU_CAPABILITY=default (torch's plain CPU kernels, no AVX): an
             output that depends on this CPU's vector units fails here, not on a reader's laptop
  widgets    stored widget state and the notebook conventions (tests/test_book_widgets.py,
             tests/test_book_notebooks.py)
  book       the Jupyter Book build with warnings as errors (tests/test_book_build.py)
  browser    the built book in headless Chromium (tests/test_book_browser.py, and axe-core's
             contrast and control rules over every output, tests/test_book_a11y_browser.py;
             reuses that build), and chapters in JupyterLab started as README.md says
             (tests/test_jupyterlab_browser.py)

pytest's exit code 5 ("no tests collected") fails a step, except for `notebooks` while the
notebooks/ folder holds no chapter: a step that silently tests nothing is not a pass. A notebook
step whose only failures are Jupyter kernels that died while starting (before any cell ran) is
run once more, and the log says so; any other failure stands.

A step whose tools are missing (Chromium and chromedriver for `browser`; npm, or the two cached
asset tarballs, for `book`) is skipped on a reader's machine, and named at the end with how to
install what it needs. With CI=true nothing is skipped: the step runs and fails.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
BOOK_TESTS = ["tests/test_book_widgets.py", "tests/test_book_notebooks.py",
              "tests/test_book_build.py", "tests/test_book_browser.py",
              "tests/test_jupyterlab_browser.py", "tests/test_book_a11y_browser.py"]
COMMON = ["-p", "no:cacheprovider", "-q", "-rfE"]
CHROMIUM = os.environ.get("ATTNLIB_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("ATTNLIB_CHROMEDRIVER", "/usr/bin/chromedriver")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def workers() -> list[str]:
    """pytest-xdist on machines with more than one core (CI has two)."""
    n = os.cpu_count() or 1
    try:
        import xdist  # noqa: F401
    except ImportError:
        return []
    return ["-n", str(min(n, 2))] if n > 1 else []


# The book's two computing pages: nbval runs their check cells with the chapters
COMPUTING_PAGES = ("book/playground.ipynb", "book/smollm2_lab.ipynb")


def notebooks_slowest_first() -> list[str]:
    """The chapters and the two computing pages, the longest recorded execution first
    (benchmarks/results/notebook_times.json): two workers finish together when the long ones
    start first. "notebooks/" while none exists."""
    times = ROOT / "benchmarks" / "results" / "notebook_times.json"
    recorded = json.loads(times.read_text()) if times.exists() else {}
    pages = [p for p in (ROOT / page for page in COMPUTING_PAGES) if p.exists()]
    paths = sorted([*(ROOT / "notebooks").glob("*.ipynb"), *pages],
                   key=lambda p: (-recorded.get(p.name, {}).get("seconds", 0.0), p.name))
    return [str(p.relative_to(ROOT)) for p in paths] or ["notebooks/"]


def steps() -> dict[str, list[str]]:
    ignore = [f"--ignore={t}" for t in BOOK_TESTS]
    # Two chapters at a time (xdist, one worker per notebook file: --dist loadfile), the slowest
    # recorded first, with OMP_WAIT_POLICY=PASSIVE (see ENV): each kernel's two threads sleep
    # while they wait instead of spinning against the other kernel's (spinning, two workers were
    # four times slower than one: 806 s against 193 s).
    nbval = [PY, "-m", "pytest", "--nbval", *notebooks_slowest_first(), "--nbval-sanitize-with",
             "tests/nbval_sanitize.cfg", "--nbval-cell-timeout", "600", *COMMON,
             *workers(), *(["--dist", "loadfile"] if workers() else [])]
    return {
        "unit": [PY, "-m", "pytest", "tests", *ignore, *COMMON, *workers()],
        "notebooks": nbval,
        "notebooks-default": nbval,
        "widgets": [PY, "-m", "pytest", "tests/test_book_widgets.py", "tests/test_book_notebooks.py",
                    *COMMON],
        "book": [PY, "-m", "pytest", "tests/test_book_build.py", *COMMON],
        # two Chromium sessions at a time (xdist, tests dealt out one by one: each worker opens
        # its own browsers and server; the book step built the book they both reuse): 726 s
        # against 1,073 s one at a time, 236 tests, quiet
        "browser": [PY, "-m", "pytest", "tests/test_book_browser.py",
                    "tests/test_book_a11y_browser.py", "tests/test_jupyterlab_browser.py",
                    *COMMON, *workers(), *(["--dist", "load"] if workers() else [])],
    }


COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)")


def counts(output: str) -> dict[str, int]:
    """The numbers in pytest's closing line ('3 failed, 10 passed, 1 skipped in 4.2s')."""
    for line in reversed(output.splitlines()):
        found = COUNT.findall(line)
        if found and (" in " in line or line.startswith("=")):
            out: dict[str, int] = {}
            for n, kind in found:
                kind = "errors" if kind.startswith("error") else kind
                out[kind] = out.get(kind, 0) + int(n)
            return out
    return {}


PASSIVE = {"OMP_WAIT_POLICY": "PASSIVE"}  # two kernels share the cores (see steps())
ENV = {"notebooks": PASSIVE, "notebooks-default": {**PASSIVE, "ATEN_CPU_CAPABILITY": "default"}}


def missing_tools(name: str) -> str:
    """What a step needs that this machine lacks, and how to get it ("" when nothing is missing)."""
    if name == "browser" and not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        return ("Chromium and chromedriver (Debian/Ubuntu: sudo apt-get install chromium "
                "chromium-driver; macOS: brew install --cask chromium chromedriver, then set "
                "ATTNLIB_CHROMIUM and ATTNLIB_CHROMEDRIVER to their paths)")
    if name in ("book", "browser") and shutil.which("npm") is None \
            and not (ROOT / "_build" / "assets" / "VERSIONS.json").exists() \
            and not os.environ.get("ATTNLIB_NPM_TARBALLS"):
        return ("npm, once, to fetch MathJax and the widget manager (Debian/Ubuntu: sudo apt-get "
                "install npm; macOS: brew install node; or see scripts/vendor_assets.py)")
    return ""


KERNEL_START = "Kernel died before replying to kernel_info"


def only_kernel_start_failures(output: str) -> bool:
    """Did every failing item of a pytest run fail because its Jupyter kernel died while starting
    (no notebook cell ran)? jupyter_client can lose a port race between two workers starting
    kernels at once; such a step is run once more (said so in the log), anything else is not."""
    bad = [line for line in output.splitlines() if re.match(r"(FAILED|ERROR) \S+::", line)]  # -rfE summary
    return bool(bad) and all(KERNEL_START in line for line in bad)


def run(name: str, cmd: list[str], retry: bool = True) -> tuple[bool, dict[str, int], float]:
    extra = ENV.get(name, {})
    shown = " ".join(f"{k}={v}" for k, v in extra.items())
    print(f"\n=== {name}: {shown + ' ' if shown else ''}{' '.join(cmd[1:])}", flush=True)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, **extra})
    lines = []
    for line in proc.stdout:  # stream, and keep it to read the closing line
        print(line, end="", flush=True)
        lines.append(line)
    rc = proc.wait()
    took = time.perf_counter() - start
    c = counts("".join(lines))
    if rc == 5 and name == "notebooks" and not list((ROOT / "notebooks").glob("*.ipynb")):
        print("=== notebooks: no chapter yet, nothing to re-run")
        return True, c, took
    if rc == 5:
        print(f"=== {name}: pytest collected no tests (exit 5): counted as a failure")
    if rc != 0 and retry and "--nbval" in cmd and only_kernel_start_failures("".join(lines)):
        print(f"=== {name}: every failure was a kernel that died while starting ({KERNEL_START!r}), "
              "not a notebook: running the step once more")
        ok, c, again = run(name, cmd, retry=False)
        return ok, c, took + again
    return rc == 0, c, took


def main(argv: list[str]) -> int:
    table = steps()
    chosen = argv or list(table)
    unknown = [s for s in chosen if s not in table]
    if unknown:
        print(f"unknown step(s) {unknown}; steps are {list(table)}", file=sys.stderr)
        return 2
    skipped = {name: need for name in chosen if (need := missing_tools(name)) and not IN_CI}
    results = {name: run(name, table[name]) for name in chosen if name not in skipped}
    total: dict[str, int] = {}
    print("\n=== summary")
    for name, need in skipped.items():
        print(f"  {name:<10} SKIPPED: needs {need}")
    for name, (ok, c, took) in results.items():
        for k, v in c.items():
            total[k] = total.get(k, 0) + v
        detail = ", ".join(f"{v} {k}" for k, v in c.items()) or "no counts"
        print(f"  {name:<10} {'ok  ' if ok else 'FAIL'}  {detail}  ({took:.0f} s)")
    failed_steps = [n for n, (ok, _, _) in results.items() if not ok]
    failed = total.get("failed", 0) + total.get("errors", 0)
    if failed_steps and failed == 0:
        failed = len(failed_steps)  # a step failed without a failing test (build error, exit 5)
    print(f"total: {total.get('passed', 0)} passed, {failed} failed, {total.get('skipped', 0)} skipped")
    if failed_steps:
        print(f"failed steps: {', '.join(failed_steps)}")
    if skipped:
        print(f"skipped steps: {', '.join(skipped)} (install what they need, then `make test` again;"
              " CI runs them all)")
    return 1 if failed_steps else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
