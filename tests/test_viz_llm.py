"""viz.llm_lab without a browser: what the page carries (scripts and a small payload, never the
weights), its bad input, the still picture for hosts without scripts, and that the SmolLM2 lab
page (book/smollm2_lab.ipynb) stores the output its code makes now. The browser side is
tests/test_viz_llm_browser.py."""
from __future__ import annotations

import ast
import json
import math
import re
import sys
from pathlib import Path

import pytest
import torch

import attnlib
from attnlib import viz
from attnlib.viz.llm import SMOLLM2_SRC

ROOT = Path(__file__).resolve().parent.parent
VIZ = ROOT / "attnlib" / "viz"
sys.path.insert(0, str(ROOT / "scripts"))
import book_checks  # noqa: E402


def test_the_page_carries_scripts_and_a_small_payload_not_the_model():
    lab = viz.llm_lab(file_bytes=98_362_432, experiments=[{"sentence": "s", "text": "t", "off": [(17, 3)],
                                                           "show": (18, 6), "lens": -1}])
    p = lab.payload
    assert p["src"] == SMOLLM2_SRC == "../models/SmolLM2-135M-Instruct.Q4_1.gguf"
    assert p["fileName"] == "SmolLM2-135M-Instruct.Q4_1.gguf" and p["fileBytes"] == 98_362_432
    assert p["experiments"] == [{"sentence": "s", "text": "t", "off": [[17, 3]], "show": [18, 6], "lens": -1}]
    html = lab.to_html()
    assert 'class="attnlib-explorer attnlib-kit attnlib-llm"' in html
    for name in ("engine.js", "kit.js", "weights.js", "live_model.js", "gguf.js", "bpe.js", "llm_panels.js", "llm.js"):
        assert (VIZ / name).read_text(encoding="utf-8") in html, name
    assert lab.nbytes < 300_000, f"{lab.nbytes} bytes: the page must stay light until the click"
    assert "http" not in json.dumps(p) and "//" not in p["src"], "the file comes from the book, no host"
    assert json.loads(json.dumps(p)) == p


def test_its_scripts_are_shared_libraries_of_readable_size():
    for name in ("weights.js", "gguf.js", "bpe.js", "llm_panels.js"):
        body = (VIZ / name).read_text(encoding="utf-8")
        assert name in book_checks.LIBRARY_JS and "document.currentScript" not in body
        assert re.search(r"^window\.attnlib\w+ = window\.attnlib\w+ \|\|", body, re.M), name
    for name in ("weights.js", "live_model.js", "gguf.js", "bpe.js", "llm.js", "llm_panels.js"):
        assert len((VIZ / name).read_text(encoding="utf-8").splitlines()) <= 600, name


@pytest.mark.parametrize("call, exc, match", [
    (lambda: viz.llm_lab(src="", file_bytes=1), TypeError, "src must be a non-empty str"),
    (lambda: viz.llm_lab(prompt=3, file_bytes=1), TypeError, "prompt must be a non-empty str"),
    (lambda: viz.llm_lab(title=5, file_bytes=1), TypeError, "title must be a str"),
    (lambda: viz.llm_lab(lab_tokens=0, file_bytes=1), ValueError, "lab_tokens must be an int from 1"),
    (lambda: viz.llm_lab(chat_tokens=10_000, file_bytes=1), ValueError, "chat_tokens"),
    (lambda: viz.llm_lab(temperature="hot", file_bytes=1), TypeError, "temperature and top_p must be numbers"),
    (lambda: viz.llm_lab(top_p=0.0, file_bytes=1), ValueError, "0 < top_p <= 1"),
    (lambda: viz.llm_lab(temperature=math.inf, file_bytes=1), ValueError, "temperature <= 5"),
    (lambda: viz.llm_lab(file_bytes=-1), ValueError, "file_bytes must be a positive int"),
    (lambda: viz.llm_lab(cmap="nope", file_bytes=1), ValueError, "unknown colormap"),
    (lambda: viz.llm_lab(experiments=[{"text": "a"}], file_bytes=1), TypeError, "'sentence' string"),
    (lambda: viz.llm_lab(experiments=[{"sentence": "a", "why": 1}], file_bytes=1), ValueError, "unknown keys"),
    (lambda: viz.llm_lab(experiments=[{"sentence": "a", "off": [(30, 0)]}], file_bytes=1), ValueError,
     "0 <= layer < 30"),
    (lambda: viz.llm_lab(experiments=[{"sentence": "a", "show": (1,)}], file_bytes=1), ValueError, "pairs"),
    (lambda: viz.llm_lab(experiments=[{"sentence": "a", "lens": "last"}], file_bytes=1), TypeError, "lens"),
])
def test_bad_input_is_refused_with_a_message(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_near_misses_are_accepted():
    import numpy as np

    lab = viz.llm_lab(file_bytes=np.int64(5), temperature=np.float32(0.5), top_k=np.int64(3),
                      experiments=[{"sentence": "a", "off": [np.array([1, 2])], "show": [0, 8]}])
    assert lab.payload["experiments"][0]["off"] == [[1, 2]] and lab.payload["sampling"]["topK"] == 3


@pytest.fixture(scope="module")
def smollm2():
    try:
        return attnlib.load_smollm2()
    except (ModuleNotFoundError, FileNotFoundError) as e:
        pytest.skip(f"SmolLM2 is not installed: {e}")


def test_the_still_picture_shows_what_the_lab_would(smollm2):
    model, tok = smollm2
    lab = viz.llm_lab(model, tok)  # no experiment: layer 18, head 6 over the starting text
    assert "<svg" in lab.still and "layer 18, head 6" in lab.still and "\u201c Paris\u201d 0.77" in lab.still
    assert "nothing to copy" in lab.still  # no token of "The capital of France is" comes twice
    assert "Python cells" in lab.still and lab.payload["fileBytes"] == attnlib.pretrained.smollm2_path().stat().st_size
    # the first experiment that shows a head: its text and head, every head on (none switched off)
    repeat = "The zebra sang violet songs to a cobalt owl. The zebra sang violet songs to a"
    lab = viz.llm_lab(model, tok, experiments=[{"sentence": "lens", "lens": -1},
                                               {"sentence": "s", "text": repeat, "off": [(18, 6)], "show": (18, 6)},
                                               {"sentence": "t", "show": (18, 8)}])
    assert "the lab's second experiment" in lab.still and "layer 18, head 6" in lab.still
    # the labels show "The" twice: the second is " The", another token; the caption says so
    assert ("Of the text's 17 tokens, 7 look like an earlier one in the labels; 6 of them are the "
            "same token again (\u201c zebra\u201d, \u201c sang\u201d, \u201c violet\u201d, "
            "\u201c songs\u201d, \u201c to\u201d, \u201c a\u201d).") in lab.still
    assert ("\u201c The\u201d (token 10, counting from 0) only looks like \u201cThe\u201d (token "
            "0): it begins with a space, which the labels do not show, so it is another token. "
            "At all 6 repeats,") in lab.still
    assert "\u201c cobalt\u201d 0.42" in lab.still
    bar = re.search(r'<g class="attnlib-colorbar">(.*?)</g>', lab.still).group(1)  # the colour bar
    assert bar.count("<rect") == 32 and "attention weight" in lab.still


def test_the_stills_caption_counts_what_its_labels_show():
    """A label that looks like an earlier one is a repeat or another token, and the caption says
    which, and why the two look alike (labels do not show the spaces at a token's ends)."""
    from attnlib.viz.llm import _repeats_caption

    said = _repeats_caption([1, 2, 3, 1, 4], ["x", "b", "y", "x", " b"], {3: 1}, 1)
    assert said.startswith("Of the text's 5 tokens, 2 look like an earlier one in the labels; "
                           "1 of them is the same token again (\u201cx\u201d).")
    assert ("\u201c b\u201d (token 4, counting from 0) only looks like \u201cb\u201d (token 1): "
            "it begins with a space") in said and "At this repeat," in said
    said = _repeats_caption([1, 2, 3], ["b ", "c", "b"], {}, 0)
    assert "the earlier one ends with whitespace" in said and "nothing to copy" in said
    said = _repeats_caption([1, 2, 3], ["b", "c", "b"], {}, 0)
    assert "different token ids with the same text" in said
    assert "No token comes twice" in _repeats_caption([1, 2], ["a", "b"], {}, 0)


def test_the_labs_memory_sentence_quotes_the_stored_browser_run():
    """The lab page's memory numbers are the first round of benchmarks/results/smollm2_browser.json
    (a new tab process): the tab's total and, within it, the WebAssembly memory (the benchmarks
    page, which the sentence points to for the breakdown, tabulates the same run)."""
    run = json.loads((ROOT / "benchmarks" / "results" / "smollm2_browser.json").read_text())
    r = run["browser"]["rounds"][0]
    nb = json.loads((ROOT / "book" / "smollm2_lab.ipynb").read_text(encoding="utf-8"))
    text = " ".join(" ".join("".join(c["source"]).split()) for c in nb["cells"]
                    if c["cell_type"] == "markdown")
    mb = lambda b: f"{b / 1e6:.0f} MB"  # noqa: E731
    said = (f"held {mb(r['tab_bytes'])} of its own memory, {mb(r['wasm_memory_bytes'])} of it the "
            f"WebAssembly memory that holds the model's file")
    assert said in text, said
    assert r["file_bytes"] < r["wasm_memory_bytes"] < r["tab_bytes"]  # the parts nest as said
    bench = (ROOT / "book" / "benchmarks.md").read_text(encoding="utf-8")
    for label, key in (("the tab's memory that no other process shares", "tab_bytes"),
                       ("in the tab, the WebAssembly memory", "wasm_memory_bytes"),
                       ("in the tab, the JavaScript heap", "js_heap_bytes")):
        assert f"| {label} | {mb(r[key])} |" in bench, (label, mb(r[key]))


def test_smollm2_lab_page_output_is_current(smollm2):
    """book/smollm2_lab.ipynb stores the lab as executed; a change to its scripts, styles or llm.py
    needs `python scripts/execute_notebooks.py book/smollm2_lab.ipynb`. The still picture (drawn
    from float32 attention weights, whose colour bins may differ between CPUs) is left out."""
    nb = json.loads((ROOT / "book" / "smollm2_lab.ipynb").read_text(encoding="utf-8"))
    cell = next(c for c in nb["cells"] if c["cell_type"] == "code" and "llm_lab" in "".join(c["source"]))
    assert "hide-input" in cell["metadata"].get("tags", [])
    lines = "".join(cell["source"]).splitlines()  # the Colab lines (%pip) become `pass`, indented
    src = "\n".join(line.split("%")[0] + "pass" if line.strip().startswith("%") else line for line in lines)
    body = ast.parse(src).body
    scope: dict = {"attnlib": attnlib}
    with torch.enable_grad():  # the page turns gradients off for its kernel: not for the tests after
        exec(compile(ast.Module(body=body[:-1], type_ignores=[]), "smollm2_lab", "exec"), scope)
        fresh = eval(compile(ast.Expression(body[-1].value), "smollm2_lab", "eval"), scope)
    assert torch.is_grad_enabled()
    stored = "".join(next(o for o in cell["outputs"] if "text/html" in o.get("data", {}))["data"]["text/html"])
    still = re.compile(r'<div class="attnlib-noscript">.*?</div><script type="application/json"', re.S)
    cut = lambda h: still.sub("", h)  # noqa: E731
    assert cut(stored) == cut(fresh.to_html()), \
        "book/smollm2_lab.ipynb is stale: re-execute it with scripts/execute_notebooks.py"
