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
