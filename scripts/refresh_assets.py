"""Re-embed attnlib/viz's scripts and styles in the stored outputs, without running a cell.

Every explorer, live model and heads grid carries the JavaScript and CSS of ``attnlib/viz``
verbatim in its stored output (the book's pages need no kernel). After a change to those files
the stored outputs still hold the old text. Executing the notebooks again would embed the new
text, but it would also recompute every trained number with this machine's kernels, and another
processor's matrix kernels round differently and train slightly different models: the stored run
stays the book's reference (book/checking.md).

So this swaps each changed asset's text as of ``--since`` (a git revision, default HEAD) for its
text in the working tree, in every string of every notebook (outputs and the widget state, which
holds the precomputed sliders' outputs); nothing else in a notebook changes. A notebook whose
outputs hold an asset's text in neither version is left alone.

    python scripts/refresh_assets.py [--since REV] [notebook ...]   # default: every notebook
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
VIZ = ROOT / "attnlib" / "viz"


def changed_assets(since: str) -> dict[str, tuple[str, str]]:
    """{name: (text at `since`, text now)} for each .js and .css of attnlib/viz that differs."""
    out = {}
    for path in sorted([*VIZ.glob("*.js"), *VIZ.glob("*.css")]):
        rel = path.relative_to(ROOT).as_posix()
        old = subprocess.run(["git", "show", f"{since}:{rel}"], cwd=ROOT, capture_output=True,
                             text=True, encoding="utf-8")
        new = path.read_text(encoding="utf-8")
        if old.returncode == 0 and old.stdout != new:
            out[path.name] = (old.stdout, new)
    return out


def swap(value, assets: dict[str, tuple[str, str]], hits: set):
    """value with every old asset text replaced by the new one (walks dicts, lists, strings)."""
    if isinstance(value, str):
        for name, (old, new) in assets.items():
            if old in value:
                value = value.replace(old, new)
                hits.add(name)
        return value
    if isinstance(value, list):
        return [swap(v, assets, hits) for v in value]
    if isinstance(value, dict):
        return {k: swap(v, assets, hits) for k, v in value.items()}
    return value


def resize(data: dict) -> None:
    """A live model's text form ends in its HTML's size (``LiveModel(..., 452 KiB)``): recount."""
    text, page = "".join(data.get("text/plain", "")), "".join(data.get("text/html", ""))
    if text.startswith("LiveModel(") and page:
        data["text/plain"] = re.sub(r"\d+ KiB\)$", f"{len(page.encode('utf-8')) // 1024} KiB)",
                                    text)


def refresh(path: Path, assets: dict[str, tuple[str, str]]) -> set:
    """Rewrite the notebook at path with the new assets; returns the names it swapped."""
    nb = nbformat.read(path, as_version=4)
    hits: set = set()
    for cell in nb.cells:
        if "outputs" in cell:
            cell.outputs = nbformat.from_dict(swap(cell.outputs, assets, hits))
            for out in cell.outputs:
                resize(out.get("data", {}))
    if "widgets" in nb.metadata:
        nb.metadata.widgets = nbformat.from_dict(swap(nb.metadata.widgets, assets, hits))
    if hits:
        nbformat.write(nb, path)
    return hits


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--since", default="HEAD", help="the revision whose assets the outputs hold")
    ap.add_argument("notebooks", nargs="*", type=Path)
    args = ap.parse_args(argv)
    assets = changed_assets(args.since)
    if not assets:
        print(f"no asset of attnlib/viz differs from {args.since}")
        return 0
    print("changed since", args.since + ":", ", ".join(assets))
    paths = args.notebooks or sorted([*ROOT.glob("notebooks/*.ipynb"),
                                      *ROOT.glob("book/*.ipynb")])
    for path in paths:
        hits = refresh(path, assets)
        if hits:
            print(f"  {path}: {', '.join(sorted(hits))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
