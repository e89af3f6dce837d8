"""scripts/execute_notebooks.py: its command line (executing a chapter is nbval's job)."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "execute_notebooks.py"


def test_jobs_below_one_is_refused_before_any_kernel_starts():
    run = subprocess.run([sys.executable, str(SCRIPT), "--jobs", "0"], capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 2
    assert "--jobs must be at least 1, got 0" in run.stderr
    assert "executing" not in run.stdout  # nothing ran


def test_the_slowest_recorded_notebooks_go_first(monkeypatch, tmp_path):
    sys.path.insert(0, str(SCRIPT.parent))
    import execute_notebooks as ex

    times = tmp_path / "times.json"
    times.write_text('{"a.ipynb": {"seconds": 5}, "b.ipynb": {"seconds": 50}}')
    monkeypatch.setattr(ex, "TIMES", times)
    order = []

    class Pool:  # runs in this process, in submission order
        def __init__(self, jobs):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def submit(self, fn, path):
            from concurrent.futures import Future
            order.append(path.name)
            f = Future()
            f.set_result(1.0)
            return f

    import concurrent.futures
    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", Pool)
    got = ex.run([tmp_path / "a.ipynb", tmp_path / "c.ipynb", tmp_path / "b.ipynb"], jobs=2)
    assert order == ["b.ipynb", "a.ipynb", "c.ipynb"]  # 50 s, 5 s, never recorded
    assert sorted(got) == ["a.ipynb", "b.ipynb", "c.ipynb"]


def test_kernels_are_pinned_to_avx2_only_where_the_cpu_has_it_and_nothing_is_set(monkeypatch, tmp_path):
    sys.path.insert(0, str(SCRIPT.parent))
    import execute_notebooks as ex

    real_path = ex.Path
    for var in ex.STORED_KERNELS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")  # the reader's own choice stays
    cpuinfo = tmp_path / "cpuinfo"

    def fake_path(arg, *rest):
        return cpuinfo if arg == "/proc/cpuinfo" else real_path(arg, *rest)

    monkeypatch.setattr(ex, "Path", fake_path)
    cpuinfo.write_text("flags\t\t: fpu sse2 avx\n")  # no AVX2: nothing pinned
    assert ex.pin_kernels() == {}
    assert "MKL_ENABLE_INSTRUCTIONS" not in ex.os.environ
    cpuinfo.write_text("flags\t\t: fpu sse2 avx avx2 avx512f\n")
    assert ex.pin_kernels() == {"MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    assert ex.os.environ["ATEN_CPU_CAPABILITY"] == "default"
    assert ex.os.environ["MKL_ENABLE_INSTRUCTIONS"] == "AVX2"
