"""Smoke tests of the benchmark harness: tiny sizes, seconds, no timed assertions.

What is checked: the JSON schema, that ratios are the medians of per-round ratios, that stalled
rounds are discarded, that the profiler-based peak memory sees the (T, T) tensors of the math path
and not of the fused kernel, and that the stored --full results and the book page agree.
"""
from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest
import torch

import attnlib
from benchmarks import harness
from benchmarks.__main__ import SCHEMA, main, settings_for
from benchmarks.report import render_page

ROOT = Path(__file__).resolve().parents[1]
STORED = ROOT / "benchmarks" / "results" / "full_cpu.json"  # the run the page shows
PAGE = ROOT / "book" / "benchmarks.md"


def check_comparison(res: dict, names: set[str]) -> None:
    """A compare() result: medians and ratios over the kept rounds, baseline ratio 1."""
    assert set(res["median_s"]) == names and set(res["ratio"]) == names
    kept = [r for r in res["rounds"] if r["kept"]]
    assert len(kept) == res["kept_rounds"] >= 1
    base = res["baseline"]
    assert res["ratio"][base] == pytest.approx(1.0)
    for n in names:
        assert res["median_s"][n] > 0
        assert res["median_s"][n] == pytest.approx(statistics.median(r["times_s"][n] for r in kept))
        assert res["ratio"][n] == pytest.approx(statistics.median(r["times_s"][n] / r["times_s"][base] for r in kept))


def check_targets(targets: list[dict]) -> None:
    assert targets, "every benchmark states targets"
    for t in targets:
        assert set(t) >= {"name", "value", "op", "limit", "met"}
        if t["value"] is None:
            assert t["met"] is None
        else:
            assert t["met"] == (t["value"] <= t["limit"] if t["op"] == "<=" else t["value"] >= t["limit"])


def check_document(doc: dict, benchmarks: set[str]) -> None:
    assert doc["schema"] == SCHEMA
    assert set(doc["benchmarks"]) == benchmarks
    assert doc["env"]["threads"] == doc["settings"]["threads"] >= 1
    assert doc["calibration"]["matmul"]["gflops"] > 0 and doc["calibration"]["bandwidth"]["gbs"] > 0
    check_targets(doc["targets"])
    assert len(doc["targets"]) == sum(len(b["targets"]) for b in doc["benchmarks"].values())
    if "attention" in benchmarks:
        att = doc["benchmarks"]["attention"]
        for row, crow in zip(att["sizes"], att["causal"]):
            check_comparison(row["timing"], {"torch_sdpa", "attnlib_sdpa", "attnlib_math"})
            check_comparison(crow["timing"], {"is_causal", "bool_mask", "torch_is_causal", "torch_bool_mask", "math_is_causal"})
            assert row["overhead"] == row["timing"]["ratio"]["attnlib_sdpa"]
            assert row["memory"]["attnlib_sdpa"]["sdpa_kernels"], "the kernel that ran is recorded"
            # the memory claim the book makes: math holds >= 2 (B,H,T,T) tensors, sdpa not one
            assert row["memory"]["attnlib_math"]["peak_bytes"] >= 2 * row["tt_bytes"]
            assert row["memory"]["attnlib_sdpa"]["peak_bytes"] < row["tt_bytes"] or row["T"] < 128
        # ... and the growth the page describes: math quadratic in T, sdpa linear
        first, last = att["sizes"][0], att["sizes"][-1]
        grow = last["T"] / first["T"]
        peak = lambda row, k: row["memory"][k]["peak_bytes"]  # noqa: E731
        assert peak(last, "attnlib_math") / peak(first, "attnlib_math") >= 0.5 * grow**2
        assert peak(last, "attnlib_sdpa") / peak(first, "attnlib_sdpa") <= 1.5 * grow
    if "models" in benchmarks:
        for run in doc["benchmarks"]["models"]["runs"]:
            check_comparison(run["timing"], {"hf_sdpa", "attnlib", "hf_eager"})
            assert run["attnlib_over_hf"] == run["timing"]["ratio"]["attnlib"]
            assert run["gflops"]["attnlib"] == pytest.approx(run["flops"] / run["timing"]["median_s"]["attnlib"] / 1e9)
            if doc["env"]["device"] == "cpu":  # where the time goes, for the page
                assert run["profile"]["attnlib"]["top"] and run["profile"]["attnlib"]["aten_calls"] > 0
    if "generation" in benchmarks:
        for run in doc["benchmarks"]["generation"]["runs"]:
            check_comparison(run["timing"], {"attnlib_cache", "attnlib_no_cache", "hf_cache"})
            assert run["cache_speedup"] == run["timing"]["ratio"]["attnlib_no_cache"]
            assert run["kv_cache"]["nbytes"] == run["kv_cache"]["formula"]
            assert len(run["step_s"]) == run["new"]
            # runs stored before the 2 MiB-page probes have copy and sum only (no probe_gbs)
            huge = "probe_gbs" in run and doc["env"]["device"] == "cpu"
            check_comparison(run["paired_steps"], {"step_first", "step_last", "copy", "sum", "products"}
                             | ({"copy_huge", "sum_huge"} if huge else set()))
            if "probe_gbs" in run:
                assert set(run["probe_gbs"]) == set(run["paired_steps"]["ratio"]) - {"step_first", "step_last", "products"}
                assert run["bandwidth_gbs"] == max(run["probe_gbs"].values())  # the reference: the fastest probe
            assert 0 < run["products_over_step"] and run["products_fraction_of_bandwidth"] > 0
            assert run["last_over_first_window"] == run["paired_steps"]["ratio"]["step_last"]
            assert 0 < run["fraction_of_bandwidth"]
            assert run["tokens_per_s"]["attnlib_cache"] == pytest.approx(run["new"] / run["timing"]["median_s"]["attnlib_cache"])
    if "fastpaths" in benchmarks:
        for run in doc["benchmarks"]["fastpaths"]["runs"]:
            check_comparison(run["fused_qkv"], {"fused", "three_linears"})
            check_comparison(run["preallocated_cache"], {"preallocated", "concatenate"})
            check_comparison(run["overhead"], {"attnlib", "generate_loop", "raw_sdpa_loop"})
            check_comparison(run["onednn"], {"onednn", "f_linear", "onednn_step", "f_linear_step"})
            assert run["onednn_over_f_linear"] == run["onednn"]["ratio"]["onednn"]
            assert run["generate_loop_over_raw_step"] == run["overhead"]["ratio"]["generate_loop"]
            assert run["fused_over_unfused"] == run["fused_qkv"]["ratio"]["fused"]
            assert run["preallocated_over_concat"] == run["preallocated_cache"]["ratio"]["preallocated"]
            assert run["attnlib_over_raw_step"] == run["overhead"]["ratio"]["attnlib"]
            if run.get("gelu_row") is not None:
                check_comparison(run["gelu_row"], {"aten", "f_gelu"})
                assert run["small_gelu_over_f_gelu"] == run["gelu_row"]["ratio"]["aten"]
            if run.get("big_result") is not None:
                check_comparison(run["big_result"], {"huge_pages", "f_linear"})
                assert run["big_result_over_f_linear"] == run["big_result"]["ratio"]["huge_pages"]
    if "crossover" in benchmarks:
        cx = doc["benchmarks"]["crossover"]
        assert {r["where"] for r in cx["runs"]} == {"in cache", "streamed"}
        for run in cx["runs"]:
            streamed = run["where"] == "streamed"  # also the transposed weights and a plain read
            # streamed: also the transposed weights (linear_t, RowBlocks, RowBlocks at other block
            # widths on the largest shape) and a plain read
            widths = {k for k in run["timing"]["median_s"] if k.startswith("row_blocks_")} if streamed else set()
            check_comparison(run["timing"], {"onednn", "f_linear"}
                             | ({"linear_t", "row_blocks", "read"} | widths if streamed else set()))
            assert run["macs"] == run["rows"] * run["in"] * run["out"]
            assert run["onednn_over_f_linear"] == run["timing"]["ratio"]["onednn"]
            if streamed:  # the copies add up to the stated bytes
                assert run["rows"] == 1 and run["copies"] * run["in"] * run["out"] * 4 >= 0.9 * cx["stream_bytes"]
                r = run["timing"]["ratio"]
                assert run["linear_t_over_best"] == pytest.approx(r["linear_t"] / min(1.0, r["onednn"]))
                assert run["fraction_of_read"]["linear_t"] == pytest.approx(r["read"] / r["linear_t"])
                assert run["row_blocks_over_linear_t"] == pytest.approx(r["row_blocks"] / r["linear_t"])
                assert set(run["fraction_of_read"]) == set(r) - {"read"}


    if "coldops" in benchmarks:
        for run in doc["benchmarks"]["coldops"]["runs"]:
            res = run["timing"]
            check_comparison(res, {"step", "stored_products", "summed_products", "sums", "no_attention",
                                   "no_cache_write", "no_norms", "no_activation"})
            med = res["median_s"]
            assert run["warm_ms"] == pytest.approx(med["stored_products"] * 1e3)
            assert run["cold_ms"] == pytest.approx((med["summed_products"] - med["sums"]) * 1e3)
            assert set(run["parts_ms"]) == {"attention", "cache_write", "norms", "activation"}
            for part, ms in run["parts_ms"].items():
                assert ms == pytest.approx((1 - res["ratio"]["no_" + part]) * med["step"] * 1e3)


def test_coldops_variants_leave_out_what_they_say(monkeypatch) -> None:
    """Each variant of the cold-ops benchmark runs the one-row step without exactly the part it
    names (spies count the calls): the step calls everything, "stored_products" and
    "summed_products" no product kernel, each "no_X" no X and everything else."""
    from attnlib import decode, kernels
    from attnlib.cache import KVCache
    from benchmarks import coldops
    from benchmarks.models import build_pair

    if not kernels._HAS_ROWS:
        pytest.skip("no fbgemm embedding-bag kernel in this PyTorch build")
    monkeypatch.setattr(kernels, "CACHE_BYTES", 0)
    gpt, _, cfg = build_pair("smoke", settings_for("smoke", "cpu", 1))
    counts: dict[str, int] = {}

    def spy(obj: object, name: str, key: str) -> None:
        real = getattr(obj, name)
        monkeypatch.setattr(obj, name, lambda *a, **k: counts.__setitem__(key, counts.get(key, 0) + 1) or real(*a, **k))

    with torch.inference_mode():
        fns, products = coldops.variants(gpt, cfg.vocab_size, "cpu", 0)
        spy(kernels.RowBlocks, "__call__", "products")
        spy(torch.nn.functional, "scaled_dot_product_attention", "attention")
        spy(KVCache, "update", "cache_write")
        spy(decode._Norm, "__call__", "norms")
        spy(decode, "activate", "activation")
        L = cfg.n_layers
        everything = {"products": products, "attention": L, "cache_write": L, "norms": 2 * L + 1, "activation": L}
        for name, fn in fns.items():
            counts.clear()
            fn()
            if name == "sums":
                assert counts == {}
                continue
            left_out = {"stored_products": "products", "summed_products": "products"}.get(name, name[3:])
            expect = {k: v for k, v in everything.items() if name == "step" or k != left_out}
            assert counts == expect, name


def test_fastpaths_times_a_large_result_where_there_is_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """The LM-head comparison runs where the logits reach kernels.BIG_OUTPUT (GPT-2 small in
    --full; here the smoke model, with the bound lowered), lands in the run and the tables."""
    from attnlib import kernels
    from benchmarks import fastpaths
    from benchmarks.report import _num, render_fastpaths

    if not kernels._HAS_HUGE_PAGES:
        pytest.skip("no MADV_HUGEPAGE on this platform")
    monkeypatch.setattr(kernels, "BIG_OUTPUT", 1 << 16)
    result = fastpaths.run(settings_for("smoke", "cpu", 1), log=lambda *a: None)
    (run,) = result["runs"]
    check_comparison(run["big_result"], {"huge_pages", "f_linear"})
    assert run["big_result_over_f_linear"] == run["big_result"]["ratio"]["huge_pages"]
    assert any("huge pages / F.linear" in t["name"] for t in result["targets"])
    assert "large result huge pages/F.linear" in fastpaths.table(result)
    page = render_fastpaths({"benchmarks": {"fastpaths": result}})
    assert "LM head, huge pages / F.linear" in page and f"| {_num(run['big_result_over_f_linear'])} |" in page
    # on the CPU the exact GELU of one hidden row, both ways, with its target, table column and page column
    check_comparison(run["gelu_row"], {"aten", "f_gelu"})
    (target,) = [t for t in result["targets"] if "exact GELU of one hidden row" in t["name"]]
    assert target["value"] == run["small_gelu_over_f_gelu"] == run["gelu_row"]["ratio"]["aten"]
    assert "GELU row kernels/F" in fastpaths.table(result)
    assert "GELU of one row, kernels.gelu / F.gelu" in page and f"| {_num(run['small_gelu_over_f_gelu'])} |" in page


def test_fastpaths_times_both_one_token_kernels_of_a_streamed_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """For a model over the caches (here the smoke model, with the bound lowered) the decode step
    is timed with the embedding bags and with mm on contiguous W^T; the ratio, the choice and a
    target that checks the choice land in the run, its table and the page."""
    from attnlib import decode, kernels
    from benchmarks import fastpaths
    from benchmarks.report import _num, render_fastpaths

    if not kernels._HAS_ROWS:
        pytest.skip("no fbgemm embedding-bag kernel in this PyTorch build")
    monkeypatch.setattr(kernels, "CACHE_BYTES", 0)
    result = fastpaths.run(settings_for("smoke", "cpu", 1), log=lambda *a: None)
    (run,) = result["runs"]
    check_comparison(run["streamed_kinds"], {"bags", "mm"})
    assert run["mm_over_bags_step"] == run["streamed_kinds"]["ratio"]["mm"]
    assert run["streamed_rows"] == decode.STREAMED_ROWS
    (target,) = [t for t in result["targets"] if "one-token products as chosen" in t["name"]]
    want = run["mm_over_bags_step"] if decode.STREAMED_ROWS == "mm" else 1 / run["mm_over_bags_step"]
    assert target["value"] == pytest.approx(want)
    assert "mm W^T/bags step" in fastpaths.table(result)
    page = render_fastpaths({"benchmarks": {"fastpaths": result}})
    assert "decode step, 1-token mm W^T / bags" in page and f"| {_num(run['mm_over_bags_step'])} |" in page


def test_crossover_smoke(tmp_path: Path) -> None:
    """The benchmark behind attnlib.kernels' size bounds (its own --only, like smollm2)."""
    out = tmp_path / "cx.json"
    assert main(["--smoke", "--only", "crossover", "--out", str(out)]) == 0
    check_document(json.loads(out.read_text()), {"crossover"})


def test_coldops_smoke(tmp_path: Path) -> None:
    out = tmp_path / "co.json"
    assert main(["--smoke", "--only", "coldops", "--out", str(out)]) == 0
    check_document(json.loads(out.read_text()), {"coldops"})


def test_cli_smoke_writes_schema_and_plots(tmp_path: Path) -> None:
    out = tmp_path / "smoke.json"
    assert main(["--smoke", "--out", str(out), "--plots", str(tmp_path)]) == 0
    doc = json.loads(out.read_text())
    check_document(doc, {"attention", "models", "generation", "fastpaths"})
    for name in ("attention", "models", "generation"):
        assert (tmp_path / f"smoke_cpu_{name}.png").stat().st_size > 10_000
    # what the GPU session (benchmarks.gpu) adds and renders, exercised here on the CPU
    from benchmarks.models import train_step
    from benchmarks.report import render_gpu_doc
    doc["benchmarks"]["models"]["train_step"] = train_step(settings_for("smoke", "cpu", 1), compile_too=False)
    assert doc["benchmarks"]["models"]["train_step"]["eager"]["tflops"] > 0
    block = render_gpu_doc(doc)
    assert "flash_attention" in block and "| eager |" in block and all(t["name"] in block for t in doc["targets"])


def test_compare_ratio_is_the_median_of_paired_round_ratios(monkeypatch: pytest.MonkeyPatch) -> None:
    # scripted block times: per round, a and b; round 1 is slow for both (a load spike)
    script = {"a": [1e-3, 1.0, 10.0, 3.0], "b": [1e-3, 2.0, 10.0, 1.5]}  # first entry: calibration

    def a() -> None: ...

    def b() -> None: ...

    names = {a: "a", b: "b"}
    monkeypatch.setattr(harness, "_time_call", lambda fn, device: script[names[fn]].pop(0))
    res = harness.compare({"a": a, "b": b}, harness.Settings(mode="smoke", warmup=0, rounds=3, block_s=1e-4))
    assert res["calls_per_block"] == {"a": 1, "b": 1}
    # per-round ratios 2, 1, 0.5 -> median 1; the ratio of the medians (2 / 3) would be wrong
    assert res["ratio"]["b"] == pytest.approx(1.0)
    assert res["median_s"] == {"a": 3.0, "b": 2.0}
    assert all(rd["kept"] for rd in res["rounds"]) and not res["noisy"]


def test_compare_discards_stalled_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    # fake PSI counter, read before and after each round: round 1 (of rounds 0..3) sees a 1 s stall
    state = {"stall_us": 0, "reads": 0}

    def fake_stall() -> int:
        state["reads"] += 1
        if state["reads"] == 4:  # the read that closes round 1
            state["stall_us"] += 1_000_000
        return state["stall_us"]

    monkeypatch.setattr(harness, "cpu_stall_us", fake_stall)
    s = harness.Settings(mode="smoke", warmup=0, rounds=4, block_s=0.001, min_clean=2)
    res = harness.compare({"a": lambda: sum(range(100)), "b": lambda: sum(range(200))}, s)
    assert [r["kept"] for r in res["rounds"]] == [True, False, True, True]
    assert res["rounds"][1]["stall"] > s.max_stall and not res["noisy"]
    check_comparison(res, {"a", "b"})


def test_compare_keeps_least_stalled_when_all_are_stalled(monkeypatch: pytest.MonkeyPatch) -> None:
    state = {"us": 0, "reads": 0}

    def always_stalled() -> int:
        state["reads"] += 1
        state["us"] += 10_000_000 * state["reads"]  # every block stalls, later blocks more
        return state["us"]

    monkeypatch.setattr(harness, "cpu_stall_us", always_stalled)
    s = harness.Settings(mode="smoke", warmup=0, rounds=5, block_s=0.001, min_clean=2)
    res = harness.compare({"a": lambda: None}, s)
    assert res["noisy"] and res["kept_rounds"] == 2
    kept_stalls = [r["stall"] for r in res["rounds"] if r["kept"]]
    assert max(kept_stalls) <= min(r["stall"] for r in res["rounds"] if not r["kept"])


def test_profiler_peak_memory_sees_the_score_matrix() -> None:
    torch.set_num_threads(1)
    q = torch.randn(1, 2, 256, 16)
    tt = 2 * 256 * 256 * 4
    mem = harness.profile_calls({
        "math": lambda: attnlib.scaled_dot_product_attention(q, q, q, backend="math"),
        "sdpa": lambda: attnlib.scaled_dot_product_attention(q, q, q, backend="sdpa"),
        "alloc": lambda: torch.empty(3_000_000, dtype=torch.uint8).fill_(1),
    }, "cpu")
    assert mem["math"]["peak_bytes"] >= 2 * tt
    assert mem["sdpa"]["peak_bytes"] < tt
    assert mem["alloc"]["peak_bytes"] >= 3_000_000
    assert any("scaled_dot_product" in k for k in mem["sdpa"]["sdpa_kernels"])


def test_bad_settings_and_variants_are_refused() -> None:
    with pytest.raises(ValueError, match="mode"):
        harness.Settings(mode="fast")
    with pytest.raises(ValueError, match="rounds"):
        harness.Settings(rounds=0)
    with pytest.raises(ValueError, match="baseline 'c'"):
        harness.compare({"a": lambda: None}, harness.Settings(mode="smoke", rounds=1), baseline="c")
    with pytest.raises(ValueError, match="op"):
        harness.Target("x", 1.0, "<", 2.0)
    assert harness.Target("x", 1.0, "<=", 1.05).met and not harness.Target("x", 1.1, "<=", 1.05).met
    assert harness.Target("x", None, ">=", 8.0).met is None
    assert settings_for("quick", "cpu", None).threads == 1
    with pytest.raises(SystemExit):
        main(["--smoke", "--only", "nonsense"])


def test_report_fills_generated_blocks_and_refuses_unknown_ones() -> None:
    doc = json.loads(STORED.read_text())
    page = "intro\n<!-- BEGIN generated:targets -->\nstale\n<!-- END generated:targets -->\nend\n"
    out = render_page(page, doc)
    assert "stale" not in out and out.startswith("intro\n") and out.endswith("end\n")
    assert all(t["name"] in out for t in doc["targets"])
    with pytest.raises(ValueError, match="nonsense"):
        render_page("<!-- BEGIN generated:nonsense -->\n<!-- END generated:nonsense -->", doc)


def test_stored_full_results_and_book_page_agree() -> None:
    doc = json.loads(STORED.read_text())
    assert doc["settings"]["mode"] == "full" and doc["env"]["device"] == "cpu"
    check_document(doc, {"attention", "models", "generation", "fastpaths"})
    assert any(r["compile"] for r in doc["benchmarks"]["fastpaths"]["runs"])  # the torch.compile variant ran
    page = PAGE.read_text()
    for name in ("attention", "models", "generation"):
        png = f"full_cpu_{name}.png"
        assert (STORED.parent / png).exists()
        assert f"../benchmarks/results/{png}" in page
    # the page's tables are the stored numbers: re-rendering from the JSON changes nothing
    assert render_page(page, doc) == page, "run `python -m benchmarks.report` after storing new results"
    for t in doc["targets"]:  # and every target appears with its verdict
        assert t["name"] in page, t["name"]
    assert not any(isinstance(t["value"], float) and math.isnan(t["value"]) for t in doc["targets"])
    # the two-thread generation run the page also shows: same code, both cores, every target listed
    two = json.loads((STORED.parent / "full_cpu_generation_2threads.json").read_text())
    assert two["settings"]["mode"] == "full" and two["env"]["threads"] == 2
    check_document(two, {"generation"})
    for t in two["targets"]:
        assert t["name"] in page, t["name"]
    # the crossover run behind attnlib.kernels' bounds, measured with the bounds the code has now
    cx = json.loads((STORED.parent / "full_cpu_crossover.json").read_text())
    check_document(cx, {"crossover"})
    assert cx["benchmarks"]["crossover"]["min_macs"] == attnlib.kernels.MIN_MACS
    assert cx["benchmarks"]["crossover"]["min_macs_streamed"] == attnlib.kernels.MIN_MACS_STREAMED
    for t in cx["targets"]:
        assert t["name"].split(": ", 1)[-1] in page, t["name"]
    # the cold-ops run the notes cite: the operations between products cost several times their
    # warm time in a real step
    co = json.loads((STORED.parent / "full_cpu_coldops.json").read_text())
    check_document(co, {"coldops"})
    assert co["settings"]["mode"] == "full" and co["env"]["threads"] == 1
    (run,) = co["benchmarks"]["coldops"]["runs"]
    assert run["shape"] == "gpt2-small" and run["cold_ms"] > 2 * run["warm_ms"] > 0
    from benchmarks.report import render_crossover

    runs = cx["benchmarks"]["crossover"]["runs"]
    # the tables (blocks of lines starting with "|"), each with its header, rule and one row per case
    tables = [block.strip().splitlines() for block in render_crossover(doc).split("\n\n")
              if block.strip().startswith("|")]
    products, reads, widths, verdicts = tables
    assert products[0].startswith("| rows×in→out") and len(products) == 2 + len({(r["rows"], r["in"], r["out"])
                                                                                 for r in runs})
    streamed = [r for r in runs if "fraction_of_read" in r]
    assert "RowBlocks" in reads[0] and len(reads) == 2 + len(streamed)
    swept = [r for r in streamed if any(k.startswith("row_blocks_") for k in r["fraction_of_read"])]
    assert "cols" in widths[0] and len(widths) == 2 + len(swept) and swept
    assert len(verdicts) == 2 + len(cx["targets"])


@pytest.mark.gpu
def test_cli_smoke_on_cuda(tmp_path: Path) -> None:
    """The GPU path: bf16, a fused SDPA kernel (not the math fallback), a train step with MFU."""
    out = tmp_path / "smoke_cuda.json"
    assert main(["--smoke", "--device", "cuda", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["settings"]["dtype"] == "bfloat16"
    check_document(doc, {"attention", "models", "generation", "fastpaths"})
    for row in doc["benchmarks"]["attention"]["sizes"]:
        kernels = " ".join(row["memory"]["attnlib_sdpa"]["sdpa_kernels"])
        assert any(k in kernels for k in ("flash", "efficient", "cudnn")) and "math" not in kernels, kernels
    step = doc["benchmarks"]["models"]["train_step"]
    assert step["eager"]["tflops"] > 0 and step["compiled"]["tflops"] > 0
