"""The glossary and the reference list stay connected to the chapters.

- the glossary is one Sphinx `{glossary}` directive, so every term gets an anchor of its own
  (`glossary.html#term-KV-cache`) and pages can link it with the `{term}` role; a term is plain
  ASCII text, so its anchor is predictable, and no two terms share one (Sphinx would number the
  second, and the number would move whenever an entry is added);
- every `{term}` role and every link to a glossary anchor, on a book page or in a chapter, names
  an entry that exists;
- a chapter links an entry as `[text](../book/glossary.md#term-KV-cache)` (JupyterLab shows a
  `{term}` role as raw text and has no glossary.html beside the notebook), never the glossary's top
  with an entry's name as its text; the build resolves such an anchor because
  scripts/book_checks.py registers the glossary's term ids (`register_glossary_anchors`, checked
  here on a small doctree; tests/test_book_build.py builds a book with one);
- every glossary entry links to a chapter or page that exists (and, where a link names an anchor,
  to a heading with that slug); a chapter that CONTRIBUTING.md plans but that is not written yet is
  reported by a skip, never silently accepted;
- the terms the book relies on (issue 11) all have an entry;
- every paper a chapter or a book page cites ("Clark et al., 2019", "Jain and Wallace (2019)",
  "(Shazeer, 2020)") has an entry in book/references.md, matched by first author and year.

Static checks on the committed files; nothing is executed.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

REQUIRED_TERMS = [
    "LayerNorm", "RMSNorm", "FlashAttention", "fused attention", "quantization", "temperature",
    "top-k", "top-p", "prefill", "decode", "attention sink", "encoder-decoder", "cross-attention",
    "SwiGLU", "GELU", "cross-entropy", "grouped-query attention", "multi-query attention",
    "KV cache", "induction head", "perplexity",
]

LINK = re.compile(r"\]\(([^)\s]+)\)")
NAME = r"[A-Z][a-zA-Z'-]+"
CITATIONS = [
    re.compile(rf"\b(?P<first>{NAME}) et al\.,?\s*\(?(?P<year>(?:19|20)\d\d)\b"),
    re.compile(rf"\b(?P<first>{NAME}) (?:and|&) {NAME},?\s*\(?(?P<year>(?:19|20)\d\d)\b"),
    re.compile(rf"\((?P<first>{NAME}),\s*(?P<year>(?:19|20)\d\d)[;)]"),
]


# --- helpers (pure functions, so the self-test below can feed them broken input) ------------------


GLOSSARY = re.compile(r"^```\{glossary\}\n(.*?)^```$", re.M | re.S)
TERM_ROLE = re.compile(r"\{term\}`([^`]*)`")
GLOSSARY_LINK = re.compile(r"\]\((?:[^)\s]*/)?glossary\.(?:md|html)#([^)\s]*)\)")


def glossary_items(text: str) -> list[tuple[list[str], str]]:
    """The page's one `{glossary}` directive -> [(terms, definition)], read as Sphinx reads it:
    one or more unindented term lines, then the indented definition; a blank line ends an entry.
    Nothing but the title and prose lines may stand outside the directive (a definition list
    there would render without anchors)."""
    blocks = GLOSSARY.findall(text)
    assert len(blocks) == 1, f"{len(blocks)} {{glossary}} directives: the glossary must be one"
    outside = GLOSSARY.sub("", text)
    stray = [l for l in outside.splitlines() if l.startswith((": ", "  ")) and l.strip()]
    assert not stray, f"definition-list lines outside the {{glossary}} directive: {stray[:3]}"
    items: list[tuple[list[str], str]] = []
    in_definition = False
    for line in blocks[0].splitlines():
        if not line.strip():
            continue
        if not line[0].isspace():
            if in_definition or not items:
                items.append(([], ""))
                in_definition = False
            items[-1][0].append(line.strip())
        else:
            assert items, f"a definition with no term before it: {line[:40]!r}"
            in_definition = True
            items[-1] = (items[-1][0], items[-1][1] + line.strip() + "\n")
    return items


def glossary_entries(text: str) -> dict[str, str]:
    """{the entry's terms joined by " / ": definition text}, for every entry with a definition."""
    return {" / ".join(terms): body for terms, body in glossary_items(text) if body}


def glossary_terms(text: str) -> list[str]:
    return [term for terms, _ in glossary_items(text) for term in terms]


def term_anchor(term: str) -> str:
    """The id Sphinx gives a glossary term: sphinx.util.nodes.make_id(env, doc, "term", term),
    i.e. _make_id("term-" + term) (case kept; runs of other characters than letters, digits,
    "." and "_" -> "-"; none at the end), for a plain ASCII term."""
    anchor = re.sub(r"[^a-zA-Z0-9._]+", "-", " ".join(f"term-{term}".split()))
    return re.sub(r"^[-0-9._]+|-+$", "", anchor)


def anchor_problems(text: str) -> list[str]:
    """Terms whose anchor is not predictable or not unique."""
    problems, seen = [], {}
    for term in glossary_terms(text):
        if not term.isascii() or re.search(r"[$`*\[\]<>\\]", term):
            problems.append(f"{term!r}: a term is plain ASCII text (markup or math changes its anchor)")
        anchor = term_anchor(term)
        if anchor == "term" or anchor.lower() in seen:
            problems.append(f"{term!r}: anchor {anchor!r} is not its own (also {seen.get(anchor.lower())!r})")
        seen[anchor.lower()] = term
    return problems


def glossary_reference_problems(sources: dict[str, str], glossary: str) -> list[str]:
    """`{term}` roles and links to glossary anchors that name no entry."""
    terms = {t.lower() for t in glossary_terms(glossary)}
    anchors = {term_anchor(t) for t in glossary_terms(glossary)}
    problems = []
    for name, text in sources.items():
        for role in TERM_ROLE.findall(text):
            m = re.fullmatch(r"(.*?)\s*<([^<>]+)>", role)
            target = (m[2] if m else role).strip()
            if target.lower() not in terms:
                problems.append(f"{name}: {{term}}`{role}` names no glossary entry")
        for anchor in GLOSSARY_LINK.findall(text):
            if anchor not in anchors:
                problems.append(f"{name}: glossary link #{anchor} names no entry's anchor")
    return problems


CHAPTER_LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]*glossary\.(?:md|html)[^)\s]*)\)")
CHAPTER_GLOSSARY = "../book/glossary.md"  # the glossary, relative to notebooks/


def names_an_entry(text: str, terms: list[str]) -> bool:
    """Whether a link's text is an entry's name: a term, or its part before " (", in the singular
    or plural ("kernel", "KV caches", "LoRA" for "LoRA (low-rank adaptation)")."""
    names = {n.lower() for t in terms for n in (t, t.split(" (")[0])}
    text = " ".join(text.lower().split())
    return any(form in names for form in (text, text.removesuffix("s"), text.removesuffix("es")))


def chapter_link_problems(chapters: dict[str, str], glossary: str) -> list[str]:
    """Glossary links in chapters' markdown that would not work in both JupyterLab and the book:
    a `{term}` role, a link to anything but ../book/glossary.md, or a link to the glossary's top
    whose text names an entry (it should link the entry's anchor)."""
    terms = glossary_terms(glossary)
    problems = []
    for name, text in chapters.items():
        for role in TERM_ROLE.findall(text):
            problems.append(f"{name}: {{term}}`{role}` shows as raw text in JupyterLab: "
                            f"link {CHAPTER_GLOSSARY}#term-...")
        for label, target in CHAPTER_LINK.findall(text):
            path, _, anchor = target.partition("#")
            if path != CHAPTER_GLOSSARY:
                problems.append(f"{name}: [{label}]({target}): a chapter links {CHAPTER_GLOSSARY}")
            elif not anchor and names_an_entry(label, terms):
                problems.append(f"{name}: [{label}]({target}) names an entry: link its anchor")
    return problems


def slug(heading: str) -> str:
    """MyST/GitHub-style anchor of a heading: lower case, punctuation dropped, spaces -> '-'."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def headings(path: Path) -> list[str]:
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    else:
        text = path.read_text(encoding="utf-8")
    return [m[1] for m in re.finditer(r"^#{1,6}\s+(.*)$", text, re.M)]


def planned_chapters() -> set[str]:
    """Chapter files named in CONTRIBUTING.md's chapter table (written or not)."""
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    return set(re.findall(r"^\|\s*`(\d\d_\w+\.ipynb)`\s*\|", text, re.M))


def link_problems(entries: dict[str, str], base: Path, planned: set[str]) -> tuple[list[str], list[str]]:
    """(problems, pending): broken links, and links to planned chapters not written yet."""
    problems, pending = [], []
    for term, body in entries.items():
        links = LINK.findall(body)
        if not links:
            problems.append(f"{term!r} links to no chapter or page")
        for link in links:
            if re.match(r"[a-z]+:", link):
                problems.append(f"{term!r} links outside the book ({link}): link the chapter that teaches it")
                continue
            target, _, anchor = link.partition("#")
            path = (base / target).resolve()
            if not path.is_file():
                if path.parent == (ROOT / "notebooks").resolve() and path.name in planned:
                    pending.append(path.name)
                else:
                    problems.append(f"{term!r} links to {link}, which does not exist")
                continue
            if anchor and anchor not in {slug(h) for h in headings(path)}:
                problems.append(f"{term!r} links to #{anchor}, but {target} has no heading with that slug")
    return problems, sorted(set(pending))


def reference_entries(text: str) -> list[str]:
    """The list items of references.md (numbered and bulleted), each joined into one line."""
    items, current = [], None
    for line in text.splitlines():
        m = re.match(r"^\s*(?:\d+\.|[-*])\s+(.*)", line)
        if m:
            current = [m[1]]
            items.append(current)
        elif current is not None and line.startswith("  ") and line.strip():
            current.append(line.strip())
        else:
            current = None
    return [" ".join(parts) for parts in items]


def cited(text: str) -> set[tuple[str, str]]:
    return {(m["first"], m["year"]) for rx in CITATIONS for m in rx.finditer(text)}


def missing_citations(sources: dict[str, str], references: str) -> list[str]:
    entries = [e.lstrip("*").strip() for e in reference_entries(references)]
    missing = []
    for name, text in sources.items():
        for first, year in sorted(cited(text)):
            if not any(re.match(rf"{re.escape(first)}\b", e) and f"({year})" in e[:200] for e in entries):
                missing.append(f"{name} cites {first} ({year}), which references.md lacks")
    return missing


def markdown_sources() -> dict[str, str]:
    """Markdown of every chapter and every book page but the reference list itself."""
    out = {}
    for path in NOTEBOOKS:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        out[path.name] = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    for path in sorted(BOOK.glob("*.md")):
        if path.name != "references.md":
            out[path.name] = path.read_text(encoding="utf-8")
    return out


# --- the checks ------------------------------------------------------------------------------------


def test_glossary_entries_link_to_existing_chapters():
    entries = glossary_entries((BOOK / "glossary.md").read_text(encoding="utf-8"))
    assert len(entries) >= 40, f"only {len(entries)} glossary entries parsed: is it still a definition list?"
    problems, pending = link_problems(entries, BOOK, planned_chapters())
    assert problems == [], "\n".join(problems)
    if pending:
        pytest.skip(f"links to planned chapters not written yet: {pending}")


def test_every_glossary_entry_has_its_own_anchor():
    text = (BOOK / "glossary.md").read_text(encoding="utf-8")
    items = glossary_items(text)
    assert len(items) >= 80, f"only {len(items)} glossary entries parsed: is it still one {{glossary}}?"
    assert all(terms and body for terms, body in items), "an entry without terms or definition"
    assert anchor_problems(text) == [], "\n".join(anchor_problems(text))
    # the anchors pages link: they must not move
    for term, anchor in (("KV cache", "term-KV-cache"), ("Kernel", "term-Kernel"),
                         ("Grouped-query attention (GQA)", "term-Grouped-query-attention-GQA"),
                         ("LLM.int8()", "term-LLM.int8"), ("Q4_1", "term-Q4_1")):
        assert term in glossary_terms(text) and term_anchor(term) == anchor, (term, anchor)


def test_term_anchor_is_sphinxs():
    """term_anchor copies Sphinx's rule; if Sphinx changes it, the anchors move: fail here."""
    nodes = pytest.importorskip("sphinx.util.nodes")
    for term in glossary_terms((BOOK / "glossary.md").read_text(encoding="utf-8")):
        assert term_anchor(term) == nodes._make_id(f"term-{term}"), term


def test_links_to_glossary_entries_name_existing_entries():
    sources = markdown_sources()
    sources["glossary.md"] = (BOOK / "glossary.md").read_text(encoding="utf-8")
    problems = glossary_reference_problems(sources, sources["glossary.md"])
    assert problems == [], "\n".join(problems)


def test_chapters_link_glossary_entries_by_their_anchors():
    glossary = (BOOK / "glossary.md").read_text(encoding="utf-8")
    sources = markdown_sources()
    chapters = {p.name: sources[p.name] for p in NOTEBOOKS}
    problems = chapter_link_problems(chapters, glossary)
    assert problems == [], "\n".join(problems)
    linked = [a for text in chapters.values() for a in GLOSSARY_LINK.findall(text) if a]
    print(f"{len(linked)} links from chapters to glossary entries: {sorted(set(linked))}")


def test_the_build_registers_glossary_anchors_for_markdown_links():
    """register_glossary_anchors adds each glossary term's id to the page's MyST slugs (which a
    `page.md#id` link is resolved against), keeps the heading slugs, and leaves other pages alone."""
    pytest.importorskip("sphinx")
    from collections import defaultdict
    from types import SimpleNamespace

    from docutils import nodes
    from docutils.utils import new_document
    from sphinx import addnodes

    import sys
    sys.path.insert(0, str(ROOT / "scripts"))
    from book_checks import register_glossary_anchors

    def page(*term_ids):
        doc = new_document("page")
        items = []
        for term_id in term_ids:
            term = nodes.term("", term_id.removeprefix("term-"), ids=[term_id])
            items.append(nodes.definition_list_item("", term, nodes.definition()))
        if term_ids:
            doc += addnodes.glossary("", nodes.definition_list("", *items))
        return doc

    metadata = defaultdict(dict)
    metadata["book/glossary"]["myst_slugs"] = {"glossary": (1, "glossary", "Glossary")}
    app = SimpleNamespace(env=SimpleNamespace(docname="book/glossary", metadata=metadata))
    register_glossary_anchors(app, page("term-KV-cache", "term-Q4_1"))
    slugs = metadata["book/glossary"]["myst_slugs"]
    assert set(slugs) == {"glossary", "term-KV-cache", "term-Q4_1"}
    assert slugs["term-KV-cache"][1:] == ("term-KV-cache", "KV-cache")
    app.env.docname = "book/intro"
    register_glossary_anchors(app, page())
    assert "myst_slugs" not in metadata["book/intro"]


def test_glossary_has_the_required_terms():
    terms = [t.lower() for t in glossary_terms((BOOK / "glossary.md").read_text(encoding="utf-8"))]
    absent = [r for r in REQUIRED_TERMS if not any(r.lower() in t for t in terms)]
    assert absent == [], f"glossary lacks entries for {absent}"


def test_every_cited_paper_is_in_the_references():
    sources = markdown_sources()
    assert any(cited(t) for t in sources.values()), "no citation found at all: is the pattern broken?"
    missing = missing_citations(sources, (BOOK / "references.md").read_text(encoding="utf-8"))
    assert missing == [], "\n".join(missing)


def test_the_checks_catch_broken_input(tmp_path):
    """Each check above fails on input that breaks its rule."""
    (tmp_path / "page.md").write_text("# Page\n\n## Real heading\n")
    glossary = ("# Glossary\n\nIntro.\n\n```{glossary}\nGood\nAlso good\n  fine\n"
                "  ([p](page.md#real-heading)).\n\n"
                "Unlinked\n  no link here.\n\nDangling\n  see [x](nowhere.md).\n\n"
                "Bad anchor\n  see [p](page.md#no-such-heading).\n\n"
                "Outside\n  see [w](https://example.org).\n```\n")
    entries = glossary_entries(glossary)
    assert set(entries) == {"Good / Also good", "Unlinked", "Dangling", "Bad anchor", "Outside"}
    assert anchor_problems(glossary) == []
    assert term_anchor("Also good") == "term-Also-good"
    assert len(anchor_problems(glossary.replace("Also good", "good"))) == 1   # same anchor, but case
    assert len(anchor_problems(glossary.replace("Also good", "Batch ($B$)"))) == 1
    with pytest.raises(AssertionError, match="outside"):
        glossary_items(glossary + "\nLate\n: a definition list after the directive.\n")
    refs = {"p.md": "{term}`good`, {term}`the good <Also good>`, [g](glossary.md#term-Good), "
                    "{term}`nothing`, [g](../book/glossary.md#term-Nothing), [g](glossary.md)"}
    assert [p.split(": ", 1)[1] for p in glossary_reference_problems(refs, glossary)] == [
        "{term}`nothing` names no glossary entry", "glossary link #term-Nothing names no entry's anchor"]
    chapters = {"c.ipynb": "[kernels](../book/glossary.md), [g](../book/glossary.md#term-Good), "
                           "[the glossary](../book/glossary.md), {term}`good`, "
                           "[g](glossary.md#term-Good), [g](../book/glossary.html#term-Good)"}
    found = [p.split(": ", 1)[1] for p in
             chapter_link_problems(chapters, glossary.replace("Unlinked", "Kernel"))]
    assert [f[:28] for f in found] == [  # roles first, then links in the page's order
        "{term}`good` shows as raw te", "[kernels](../book/glossary.m", "[g](glossary.md#term-Good): ",
        "[g](../book/glossary.html#te"], found
    assert found[1].endswith("names an entry: link its anchor"), found[1]
    assert len(chapter_link_problems(chapters, glossary)) == 3   # no entry "Kernel": top is fine
    assert chapter_link_problems({"c.ipynb": "[g](../book/glossary.md#term-Good), "
                                             "[the glossary](../book/glossary.md)"}, glossary) == []
    assert names_an_entry("Good", ["Good (g)"]) and not names_an_entry("the glossary", ["Good"])
    problems, pending = link_problems(entries, tmp_path, set())
    assert sorted(p.split("'")[1] for p in problems) == ["Bad anchor", "Dangling", "Outside", "Unlinked"]
    assert pending == []
    planned = {"Later": ": see [c](../notebooks/99_future.ipynb).\n"}
    assert link_problems(planned, BOOK, {"99_future.ipynb"}) == ([], ["99_future.ipynb"])
    assert len(link_problems(planned, BOOK, set())[0]) == 1   # not planned: broken

    refs = "# R\n\n1. **Vaswani et al. (2017)**, *Attention*.\n- **Jain and Wallace (2019)**, x.\n"
    text = {"ch.ipynb": "As Vaswani et al. (2017) and (Jain and Wallace, 2019) say; "
                        "Clark et al., 2019 and (Shazeer, 2020) too."}
    missing = missing_citations(text, refs)
    assert [m.split(" cites ")[1] for m in missing] == [
        "Clark (2019), which references.md lacks", "Shazeer (2020), which references.md lacks"]
    assert slug("What is `true`, checked?") == "what-is-true-checked"
