"""book/checking_ranges.md quotes what the chapters print: each quoted stored-run value is in the notebook.

A value the page quotes as measured in a chapter's stored run carries a marker right after it,
``2.05<!-- from:10_tiny_gpt -->`` (invisible on the page). The marker covers the number just
before it and, when that number ends a list of numbers joined only by ", " or " / ", every number
of the list (``1.973, 2.058, 2.001<!-- from:12_efficient_inference -->``). Each such number must
appear, as written, among the stored text outputs (``text/plain`` results and printed streams) of
``notebooks/<name>.ipynb``: when a re-executed chapter prints another value, this test fails until
the page is updated from the notebook.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "book" / "checking_ranges.md"  # the chapter-by-chapter page (checking.md links it)
NUMBER = r"[-+]?\d[\d,]*(?:\.\d+)?(?:e[-+]\d+)?"
MARKED = re.compile(rf"((?:{NUMBER}(?:, | / ))*{NUMBER})[x%]?<!-- from:(\w+) -->")
MARKER = re.compile(r"(?<!`)<!-- from:(\w+) -->")  # one in backticks is an example


def notebook_text(name: str) -> str:
    """The stored text a reader sees under the cells: results' text/plain and printed streams."""
    cells = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())["cells"]
    parts = []
    for cell in cells:
        for out in cell.get("outputs", []):
            if out["output_type"] == "stream":
                parts.append("".join(out["text"]))
            elif "text/plain" in out.get("data", {}):
                parts.append("".join(out["data"]["text/plain"]))
    return "\n".join(parts)


def quoted_values(page: str) -> list[tuple[str, str]]:
    """(notebook, number as written) for every marked quote; every marker must be parsed."""
    found = [(m.group(2), num) for m in MARKED.finditer(page)
             for num in re.findall(NUMBER, m.group(1))]
    assert len(MARKED.findall(page)) == len(MARKER.findall(page)), \
        "a marker that follows no number: " + str([page[max(0, m.start() - 30):m.end()]
                                                  for m in MARKER.finditer(page)
                                                  if not MARKED.search(page[max(0, m.start() - 80):m.end()])])
    return found


def printed(number: str, text: str) -> bool:
    """``number`` appears in ``text`` as a whole number (not inside 12.05 or 2.051); a sign or a
    thousands comma on the page need not be printed."""
    bare = number.lstrip("+-")
    forms = {bare, bare.replace(",", "")}
    return any(re.search(rf"(?<![\d.]){re.escape(f)}(?![\d]|\.\d)", text) for f in forms)


def test_markers_name_notebooks_and_cover_every_quote() -> None:
    page = PAGE.read_text()
    quotes = quoted_values(page)
    assert len(quotes) >= 40, f"only {len(quotes)} marked quotes"
    for name in {n for n, _ in quotes}:
        assert (ROOT / "notebooks" / f"{name}.ipynb").exists(), name
    # every number in a "stored run" column, and every paragraph that opens "The stored run", is
    # marked: a quote cannot be added without the test reading it (a clock's row, "(clock" in its
    # label, gives ranges over runs: its stored value changes with every execution)
    header = None
    for line in page.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        if header is None:
            header = cells
        elif not set(line) <= set("|- "):
            for h, cell in zip(header, cells):
                if "stored run" in h and re.search(r"\d", cell) and "(clock" not in line:
                    assert MARKER.search(cell), f"unmarked stored-run value: {line}"
    for para in page.split("\n\n"):
        if para.startswith("The stored run"):
            assert MARKER.search(para), f"unmarked stored-run paragraph: {para[:80]}"


@pytest.mark.parametrize("name", sorted({n for n, _ in quoted_values(PAGE.read_text())}))
def test_quoted_values_are_printed_by_the_notebook(name: str) -> None:
    text = notebook_text(name)
    missing = [num for n, num in quoted_values(PAGE.read_text()) if n == name and not printed(num, text)]
    assert not missing, f"checking_ranges.md quotes {missing} from {name}, which its stored outputs do not print"


def test_a_changed_quote_fails() -> None:
    """The check can fail: a page whose first marked quote is changed to a value no chapter
    prints is refused."""
    page = PAGE.read_text()
    m = MARKED.search(page)
    changed = page[:m.start()] + "987.654" + page[m.end(1):]
    name, num = quoted_values(changed)[0]
    assert num == "987.654" and not printed(num, notebook_text(name))


def test_the_example_check_cell_is_chapter_4s() -> None:
    """checking.md shows a check cell: it must be one, as written, in chapter 4, with the output
    the page quotes, hidden from the book and folded in JupyterLab."""
    page = (ROOT / "book" / "checking.md").read_text()
    shown = re.search(r"```python\n(# Check:.*?)```", page, re.S).group(1).rstrip("\n")
    cells = json.loads((ROOT / "notebooks" / "04_scaled_dot_product_attention.ipynb").read_text())
    cell = next(c for c in cells["cells"] if "".join(c["source"]) == shown)
    assert "remove-cell" in cell["metadata"]["tags"]
    assert cell["metadata"]["jupyter"] == {"source_hidden": True, "outputs_hidden": True}
    quoted = re.search(r"\(`(mask none: weights, largest gap [^`]+)`\)", page).group(1)
    assert quoted in "".join(cell["outputs"][0]["text"])


def test_checking_page_keeps_contributor_material_last() -> None:
    """checking.md is a learner's page: test file names, the comparison's masks and the steps of
    `make test` belong to its last part, "For contributors" (details in CONTRIBUTING.md), not to
    the prose above it (a command to copy, in a code block, may name a file)."""
    page = (ROOT / "book" / "checking.md").read_text()
    learner, heading, contributors = page.partition("\n## For contributors")
    assert heading and "\n## " not in contributors, "'For contributors' must be the last section"
    assert contributors.split("\n\n")[1].startswith("Learners can stop above.")
    prose = re.sub(r"^```.*?^```", "", learner, flags=re.M | re.S)
    named = re.findall(r"tests/\w+\.py|conftest\.py|nbval_sanitize|run_tests\.py|"
                       r"importorskip|notebooks-default", prose)
    assert not named, f"contributor material above 'For contributors': {named}"


def clock_checked_chapters() -> set[int]:
    """Chapters with an assert on a clock reading: a name assigned from ``best_time``, from a
    ``perf_counter()`` difference or from a function that calls one, or from such a name."""
    import ast

    def clock(value: ast.AST) -> bool:
        return bool(re.search(r"best_time\(|perf_counter\(\) -", ast.unparse(value)))

    def names(targets: list[ast.AST]) -> set[str]:
        out = set()
        for t in targets:
            while isinstance(t, ast.Subscript):  # secs[T] = ...: secs holds clock readings
                t = t.value
            out |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
        return out

    found = set()
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        body = []
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] == "code":
                code = re.sub(r"^(\s*)[%!].*$", r"\1pass", "".join(cell["source"]), flags=re.M)
                try:
                    body += ast.parse(code).body
                except SyntaxError:  # an exercise left for the reader to complete
                    pass
        nodes = list(ast.walk(ast.Module(body=body, type_ignores=[])))
        timed = {n.name for n in nodes if isinstance(n, ast.FunctionDef) and clock(n)}
        while True:
            before = len(timed)
            for node in nodes:
                if isinstance(node, (ast.Assign, ast.AugAssign)):
                    used = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
                    if clock(node.value) or used & timed:
                        timed |= names(node.targets if isinstance(node, ast.Assign)
                                       else [node.target])
            if len(timed) == before:
                break
        if any(isinstance(node, ast.Assert) and any(
                isinstance(n, ast.Name) and n.id in timed for n in ast.walk(node.test))
               for node in nodes):
            found.add(int(path.name[:2]))
    return found


def test_speed_checks_paragraph_names_the_chapters_that_assert_on_clocks() -> None:
    """checking.md's "Speed checks" lists exactly the chapters whose asserts read a clock."""
    page = (ROOT / "book" / "checking.md").read_text()
    para = page.split("**Speed checks.**", 1)[1].split("\n\n", 1)[0]
    listed = re.search(r"but chapters ([\d, and\n]+?) assert", para).group(1)
    assert {int(n) for n in re.findall(r"\d+", listed)} == clock_checked_chapters()
