"""Teaching tokenizers: characters, and a byte-level BPE you can train in seconds.

The byte-level BPE follows GPT-2: split the text into chunks with GPT-2's regular
expression, turn each chunk into its UTF-8 bytes (ids 0..255), then repeatedly merge the
most frequent adjacent pair of ids into a new id. Any text can be encoded (every byte
has an id) and decoding is exact.
"""
from __future__ import annotations

import codecs
import heapq
import re
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

from ._checks import as_int, token_ids

# GPT-2's pre-tokenization pattern, written for Python's `re` (which has no \p{L} / \p{N}):
# \p{L} -> [^\W\d_] (letters), \p{N} -> \d, [^\s\p{L}\p{N}] -> [^\s\w] or "_". Identical to the
# original on text without exotic number characters such as "²" (which `re` counts as letters).
GPT2_SPLIT_PATTERN = (r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+"""
                      r"""|\s+(?!\S)|\s+""")
_SPLIT = re.compile(GPT2_SPLIT_PATTERN)


def _surrogate_or_replace(err: UnicodeError) -> tuple[str, int]:
    """Decode error handler: bytes of a lone surrogate (written with "surrogatepass") come back as
    that surrogate, so decode(encode(s)) == s for any str; other invalid UTF-8 becomes U+FFFD."""
    try:
        return codecs.lookup_error("surrogatepass")(err)
    except UnicodeError:
        return codecs.replace_errors(err)


codecs.register_error("attnlib.surrogate_or_replace", _surrogate_or_replace)


def _utf8(text: str) -> bytes:
    """UTF-8 bytes of any str, lone surrogates included (Python strings may hold them)."""
    return text.encode("utf-8", errors="surrogatepass")


def _check_int(name: str, n: object) -> None:
    if as_int(n) is None:
        raise TypeError(f"{name} must be an int, got {type(n).__name__} {n!r}")


def pretokenize(text: str) -> list[str]:
    """Split ``text`` into GPT-2 chunks: words with their leading space, numbers,
    punctuation, spaces.

    BPE merges never cross a chunk boundary, so " the" and "the," cannot become one token.
    """
    return _SPLIT.findall(text)


class CharTokenizer:
    """One token per character; the vocabulary is the sorted set of characters seen in training."""

    def __init__(self, chars: Iterable[str]):
        if isinstance(chars, (bytes, bytearray)) or not hasattr(chars, "__iter__"):
            raise TypeError(f"chars must be a str (or an iterable of characters), "
                            f"got {type(chars).__name__}")
        distinct = set(chars)  # the check runs over the distinct entries, not a whole corpus
        if any(not isinstance(c, str) or len(c) != 1 for c in distinct):
            raise ValueError("CharTokenizer vocabulary entries must be single characters "
                             "(str of length 1)")
        self.itos: list[str] = sorted(distinct)
        self.stoi: dict[str, int] = {c: i for i, c in enumerate(self.itos)}

    @classmethod
    def from_text(cls, text: str) -> "CharTokenizer":
        return cls(text)

    @property
    def vocab_size(self) -> int:
        return len(self.itos)

    def encode(self, text: str) -> list[int]:
        for pos, c in enumerate(text):
            if c not in self.stoi:
                raise ValueError(f"character {c!r} at position {pos} is not in the vocabulary "
                                 f"of {self.vocab_size} characters")
        return [self.stoi[c] for c in text]

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self.itos[i] for i in token_ids(ids, self.vocab_size))


@dataclass(frozen=True)
class MergeStep:
    """One training step: ``pair`` (two ids) became ``new_id``; it occurred ``count`` times,
    and the next most frequent pair ``runner_up`` times (equal counts = a tie; see
    :func:`tie_order`)."""

    pair: tuple[int, int]
    new_id: int
    count: int
    runner_up: int


def pair_counts(words: dict[tuple[int, ...], int]) -> Counter:
    """How often each adjacent pair of ids occurs, weighting each word by its frequency."""
    counts: Counter = Counter()
    for ids, n in words.items():
        for pair in zip(ids, ids[1:]):
            counts[pair] += n
    return counts


def merge(ids: Sequence[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """Replace every non-overlapping occurrence of ``pair`` in ``ids`` (scanning left to right)."""
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


class BPETokenizer:
    """Byte-level BPE: ids 0..255 are bytes, id 256 + k is the k-th learned merge.

    Train with :meth:`train`; ``merges`` lists the learned pairs in order, ``history`` the counts.
    """

    def __init__(self, merges: Sequence[tuple[int, int]] = (),
                 history: Sequence[MergeStep] = ()):
        for name, seq in (("merges", merges), ("history", history)):
            if isinstance(seq, (str, bytes)) or not hasattr(seq, "__iter__"):
                raise TypeError(f"{name} must be a sequence, got {type(seq).__name__}")
        if any(not isinstance(h, MergeStep) for h in history):
            raise TypeError("history must hold MergeStep records (as train() makes them)")
        if any(not hasattr(p, "__len__") for p in merges):
            raise ValueError(f"merges must be pairs of ids, got {list(merges)[:3]!r}")
        self.merges: list[tuple[int, int]] = [tuple(p) for p in merges]
        self.history: list[MergeStep] = list(history)
        self.vocab: dict[int, bytes] = {i: bytes([i]) for i in range(256)}
        seen: dict[tuple[int, int], int] = {}
        for k, pair in enumerate(self.merges):
            if len(pair) != 2:
                raise ValueError(f"merge {k} must be a pair of ids, got {pair!r}")
            if any(as_int(i) is None for i in pair):
                raise TypeError(f"merge {k} must hold int ids, got {pair!r}")
            bad = [i for i in pair if not 0 <= i < 256 + k]
            if bad:
                raise ValueError(f"merge {k} uses id {bad[0]}, but only ids in [0, {256 + k}) "
                                 f"exist before it")
            a, b = self.merges[k] = (int(pair[0]), int(pair[1]))
            if (a, b) in seen:
                raise ValueError(f"merge {k} repeats the pair {(a, b)} (merge {seen[(a, b)]}); "
                                 f"its id {256 + k} could never be produced")
            seen[(a, b)] = k
            self.vocab[256 + k] = self.vocab[a] + self.vocab[b]
        self._rank = {p: k for k, p in enumerate(self.merges)}

    @classmethod
    def train(cls, text: str, num_merges: int) -> "BPETokenizer":
        """Learn ``num_merges`` merges from ``text`` (fewer if every chunk becomes one token).

        Each step merges the most frequent adjacent pair. Ties go to the pair that comes first
        in Hugging Face's order (see :func:`tie_order`), so the merges equal ``tokenizers``'
        BpeTrainer's.
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        _check_int("num_merges", num_merges)
        if num_merges < 0:
            raise ValueError(f"num_merges must be >= 0, got {num_merges}")
        # Merges happen inside chunks, so count each distinct chunk once with its frequency.
        words = {tuple(_utf8(w)): n for w, n in Counter(pretokenize(text)).items()}
        merges, history, order = [], [], tie_order()
        counts = pair_counts(words)
        for k in range(num_merges):
            if not counts:
                break
            best, runner_up = (heapq.nlargest(2, counts.values()) + [0])[:2]
            tied = [p for p, c in counts.items() if c == best]
            pair = min(tied, key=lambda p: (order.get(p[0], p[0]), order.get(p[1], p[1])))
            new_id = 256 + k
            merges.append(pair)
            history.append(MergeStep(pair, new_id, best, runner_up))
            # Only words containing the pair change: swap their old pairs for their new ones.
            for w in [w for w in words if pair in zip(w, w[1:])]:
                n = words.pop(w)
                merged = tuple(merge(w, pair, new_id))
                words[merged] = n
                counts.subtract(pair_counts({w: n}))
                counts.update(pair_counts({merged: n}))
            counts = Counter({p: c for p, c in counts.items() if c > 0})
        return cls(merges, history)

    @property
    def vocab_size(self) -> int:
        return 256 + len(self.merges)

    def _encode_chunk(self, ids: list[int], limit: int) -> list[int]:
        """Apply the merges in the order they were learned: always the lowest-ranked pair present
        (its occurrences left to right), as :func:`merge` would, pass after pass.

        Written with a heap of (rank, position) and links between the surviving tokens, so a
        chunk of n bytes takes O(n log n) rather than a scan of every pair for every merge. A merge
        only creates pairs of a higher rank (merge k uses ids below 256 + k), so popping the heap
        visits the ranks in order and each rank's occurrences left to right."""
        n = len(ids)
        tok, nxt, prv = list(ids), list(range(1, n + 1)), list(range(-1, n - 1))  # links
        rank = lambda i: self._rank.get((tok[i], tok[nxt[i]]), limit)  # noqa: E731 (nxt[i] < n)
        heap = [(r, i) for i in range(n - 1) if (r := rank(i)) < limit]
        heapq.heapify(heap)
        while heap:
            r, i = heapq.heappop(heap)
            if tok[i] is None or nxt[i] >= n or rank(i) != r:
                continue  # stale: one of the two tokens was merged away or changed since
            j = nxt[i]
            tok[i], tok[j] = 256 + r, None  # i holds the merged token, j is gone
            nxt[i] = nxt[j]
            if nxt[j] < n:
                prv[nxt[j]] = i
            for a in (prv[i], i):  # the two pairs the new token is part of
                if a >= 0 and nxt[a] < n and (ra := rank(a)) < limit:
                    heapq.heappush(heap, (ra, a))
        return [t for t in tok if t is not None]

    def encode(self, text: str, num_merges: Optional[int] = None) -> list[int]:
        """Token ids of ``text``, using only the first ``num_merges`` merges (default: all)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        if num_merges is not None:
            _check_int("num_merges", num_merges)
        limit = len(self.merges) if num_merges is None else num_merges
        if not 0 <= limit <= len(self.merges):
            raise ValueError(f"num_merges must be in [0, {len(self.merges)}], got {num_merges}")
        out: list[int] = []
        for chunk in pretokenize(text):
            out.extend(self._encode_chunk(list(_utf8(chunk)), limit))
        return out

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``; byte sequences that are not valid UTF-8 become U+FFFD (except the
        bytes of a lone surrogate, which come back as that surrogate: decoding is exact)."""
        return b"".join(self.vocab[i] for i in token_ids(ids, self.vocab_size)).decode(
            "utf-8", errors="attnlib.surrogate_or_replace")

    def token_str(self, i: int) -> str:
        """Readable text of one token (bytes that are not whole UTF-8 characters shown as
        \\xNN)."""
        i, = token_ids([i], self.vocab_size)
        return self.vocab[i].decode("utf-8", errors="backslashreplace")

    def tokens(self, text: str, num_merges: Optional[int] = None) -> list[str]:
        """The pieces of ``text``, as readable strings (see :meth:`token_str`)."""
        return [self.token_str(i) for i in self.encode(text, num_merges)]

    def merge_strings(self) -> list[tuple[str, str]]:
        """The merges as pairs of strings in GPT-2's byte-to-character alphabet (space -> "Ġ"),
        the form Hugging Face ``tokenizers`` stores in ``tokenizer.json``."""
        table = bytes_to_unicode()
        show = lambda i: "".join(table[b] for b in self.vocab[i])  # noqa: E731
        return [(show(a), show(b)) for a, b in self.merges]


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from the 256 byte values to printable characters.

    Printable Latin-1 bytes map to themselves; the rest (space, control bytes...) are shifted to
    code points 256 and up, so a space becomes "Ġ" and a newline "Ċ".
    """
    keep = (list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1))
            + list(range(0xAE, 0xFF + 1)))
    table, shift = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + shift)
            shift += 1
    return table


def tie_order() -> dict[int, int]:
    """Rank of each byte id for breaking ties between equally frequent pairs.

    Hugging Face's trainer numbers the 256 bytes by their GPT-2 character (see
    :func:`bytes_to_unicode`), so a space ("Ġ", U+0120) ranks after every letter, and breaks ties
    in favour of the pair with the smaller numbers. Merged tokens rank by creation (id 256 + k).
    """
    table = bytes_to_unicode()
    return {b: rank for rank, b in enumerate(sorted(range(256), key=lambda b: table[b]))}
