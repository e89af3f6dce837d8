"""Put the book's two third-party browser assets into _build/assets, so no page loads from a CDN.

    python scripts/vendor_assets.py            # idempotent; a no-op when already in place

What and why:
- ``@jupyter-widgets/html-manager`` ``dist/embed.js`` (+ its font files): renders the stored
  ipywidgets state in the static book (myst-nb's ``nb_ipywidgets_js`` points at it).
- ``mathjax`` 3 ``es5/``: typesets the math (Sphinx's ``mathjax_path`` points at it).

They are fetched from the npm registry at build time with ``npm pack`` (the package tarball only, no
dependency tree, no install scripts) and each tarball's sha512 is checked against the pin below
before anything is unpacked. We do not commit them: ~11 MB of minified third-party code (40 MB
unpacked) would bloat every clone, while a version + hash pin gives the same reproducibility.
For a build with no registry at all, put the two .tgz files in a folder and set
``ATTNLIB_NPM_TARBALLS=/that/folder``; they are checked against the same hashes.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEST = ROOT / "_build" / "assets"
CACHE = ROOT / "_build" / "npm-tarballs"

# name, version, tarball file name (npm's), sha512 integrity (npm's "dist.integrity")
PACKAGES = {
    "html-manager": (
        "@jupyter-widgets/html-manager", "1.0.15", "jupyter-widgets-html-manager-1.0.15.tgz",
        "sha512-5thBIV6ymNgmPVOHvzx+gGy8ZSKmSazhtGw4/c4xJDVzRhG9PTeQsRjF3FUTopvFi//SABeNz1yp47bCrJ3CQA==",
    ),
    "mathjax": (
        "mathjax", "3.2.2", "mathjax-3.2.2.tgz",
        "sha512-Bt+SSVU8eBG27zChVewOicYs7Xsdt40qm4+UpHyX7k0/O9NliPc+x77k1/FEsPsjKPZGJvtRZM1vO+geW0OhGw==",
    ),
}
STAMP = DEST / "VERSIONS.json"


def integrity(path: Path) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(path.read_bytes()).digest()).decode()


def fetch(key: str) -> Path:
    """Return a verified tarball for PACKAGES[key], from ATTNLIB_NPM_TARBALLS, the cache or npm."""
    name, version, filename, expected = PACKAGES[key]
    candidates = []
    if os.environ.get("ATTNLIB_NPM_TARBALLS"):
        candidates.append(Path(os.environ["ATTNLIB_NPM_TARBALLS"]) / filename)
    candidates.append(CACHE / filename)
    for path in candidates:
        if path.is_file() and integrity(path) == expected:
            return path
    if shutil.which("npm") is None:
        raise SystemExit(
            f"npm is needed once to fetch {name}@{version} (or set ATTNLIB_NPM_TARBALLS to a folder "
            f"holding {filename}); install Node.js/npm, e.g. `apt-get install npm`."
        )
    CACHE.mkdir(parents=True, exist_ok=True)
    subprocess.run(["npm", "pack", "--silent", f"{name}@{version}"], cwd=CACHE, check=True,
                   stdout=subprocess.DEVNULL)
    path = CACHE / filename
    got = integrity(path)
    if got != expected:
        path.unlink()
        raise SystemExit(f"{filename}: sha512 mismatch (expected {expected}, got {got}); refusing it.")
    return path


def extract(tarball: Path, prefix: str, dest: Path, skip: tuple[str, ...] = ()) -> int:
    """Unpack members under ``prefix`` of an npm tarball into ``dest`` (prefix stripped)."""
    n = 0
    with tarfile.open(tarball, "r:gz") as tar:
        for member in tar.getmembers():
            if not member.isfile() or not member.name.startswith(prefix):
                continue
            rel = member.name[len(prefix):]
            if not rel or ".." in Path(rel).parts or rel.endswith(skip):
                continue
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            with tar.extractfile(member) as src, open(target, "wb") as out:
                shutil.copyfileobj(src, out)
            n += 1
    return n


def main() -> int:
    wanted = {key: f"{spec[0]}@{spec[1]} {spec[3]}" for key, spec in PACKAGES.items()}
    if STAMP.is_file() and json.loads(STAMP.read_text()) == wanted:
        print(f"assets already in {DEST.relative_to(ROOT)}")
        return 0
    shutil.rmtree(DEST, ignore_errors=True)
    # html-manager: the self-contained bundle and the fonts it references; not the AMD builds.
    n1 = extract(fetch("html-manager"), "package/dist/", DEST / "html-manager",
                 skip=(".map", "embed-amd.js", "libembed-amd.js", ".d.ts"))
    n2 = extract(fetch("mathjax"), "package/es5/", DEST / "mathjax")
    for must in ("html-manager/embed.js", "mathjax/tex-chtml.js"):
        if not (DEST / must).is_file():
            raise SystemExit(f"{must} missing after unpacking; the package layout changed?")
    STAMP.write_text(json.dumps(wanted, indent=1))
    print(f"assets: {n1} html-manager files, {n2} MathJax files in {DEST.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
