"""scripts/run_tests.py: which failed nbval steps are run once more."""
from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "run_tests.py"
spec = importlib.util.spec_from_file_location("run_tests", SCRIPT)
run_tests = importlib.util.module_from_spec(spec)
spec.loader.exec_module(run_tests)

DIED = "RuntimeError: Kernel died before replying to kernel_info"


def test_only_a_kernel_that_died_while_starting_is_retried() -> None:
    log = "\n".join([
        'ERROR    nbval:kernel.py:59 Failure starting kernel "python3"',  # captured log, not a result
        f"ERROR notebooks/04_scaled_dot_product_attention.ipynb::Cell 0 - {DIED}",
        f"ERROR notebooks/04_scaled_dot_product_attention.ipynb::Cell 1 - {DIED}",
        "== 362 passed, 41 errors in 108.00s ==",
    ])
    assert run_tests.only_kernel_start_failures(log)
    # a cell whose output differs is a real failure: no second run, even beside a dead kernel
    assert not run_tests.only_kernel_start_failures(
        log + "\nFAILED notebooks/05_masks.ipynb::Cell 3 - nbval.plugin.NbCellError: output differs")
    assert not run_tests.only_kernel_start_failures("== 403 passed in 90.00s ==")  # nothing failed


def test_the_jupyterlab_test_runs_in_the_browser_step() -> None:
    """`make test` runs tests/test_jupyterlab_browser.py once: in the browser step, not in unit."""
    steps = run_tests.steps()
    assert "tests/test_jupyterlab_browser.py" in steps["browser"]
    assert "--ignore=tests/test_jupyterlab_browser.py" in steps["unit"]


def test_notebook_steps_run_two_chapters_at_a_time_slowest_first_with_passive_threads() -> None:
    """Each chapter whole in one worker (--dist loadfile), the longest recorded first, and OpenMP
    threads that sleep while waiting (spinning, two kernels on two cores ran 4x slower)."""
    import json

    steps = run_tests.steps()
    for name in ("notebooks", "notebooks-default"):
        assert run_tests.ENV[name]["OMP_WAIT_POLICY"] == "PASSIVE"
        cmd = steps[name]
        chapters = [c for c in cmd if c.endswith(".ipynb")]
        assert len(chapters) == len(list((SCRIPT.parents[1] / "notebooks").glob("*.ipynb"))) + 2
        assert {"book/playground.ipynb", "book/smollm2_lab.ipynb"} <= set(chapters)  # their checks
        times = json.loads((SCRIPT.parents[1] / "benchmarks/results/notebook_times.json").read_text())
        seconds = [times.get(Path(c).name, {}).get("seconds", 0.0) for c in chapters]
        assert seconds == sorted(seconds, reverse=True), chapters
        if run_tests.workers():
            assert cmd[cmd.index("--dist") + 1] == "loadfile"
    assert run_tests.ENV["notebooks-default"]["ATEN_CPU_CAPABILITY"] == "default"


def test_browser_step_runs_two_browsers_at_a_time_after_the_book_step() -> None:
    """The browser tests are dealt out one by one to the workers (--dist load; each opens its own
    Chromium and server) and come after the book step, whose build both workers reuse instead of
    building the book twice at once."""
    steps = run_tests.steps()
    cmd, order = steps["browser"], list(steps)
    assert order.index("book") < order.index("browser")
    if run_tests.workers():
        assert cmd[cmd.index("--dist") + 1] == "load" and "-n" in cmd
