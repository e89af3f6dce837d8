"""The toy date-translation task: generated pairs, checked against the standard library's parser."""
import datetime as dt

import pytest
import torch

from attnlib.dates import DateTokenizer, date_pairs, format_pair


def test_format_pair():
    assert format_pair(dt.date(2026, 11, 30)) == ("30 Nov 2026", "2026-11-30")
    assert format_pair(dt.date(1903, 2, 1)) == ("01 Feb 1903", "1903-02-01")


def test_pairs_agree_with_strptime_and_are_distinct_and_seeded():
    pairs = date_pairs(500, seed=3)
    for src, tgt in pairs:  # a reference someone else wrote: datetime's own parser
        assert dt.datetime.strptime(src, "%d %b %Y").date().isoformat() == tgt
        assert len(src) == 11 and len(tgt) == 10
    assert len({t for _, t in pairs}) == 500
    assert pairs == date_pairs(500, seed=3) and pairs != date_pairs(500, seed=4)
    small = date_pairs(3, first=dt.date(2000, 1, 1), last=dt.date(2000, 1, 3))
    assert sorted(t for _, t in small) == ["2000-01-01", "2000-01-02", "2000-01-03"]
    with pytest.raises(ValueError, match=r"\[1, 3\]"):
        date_pairs(4, first=dt.date(2000, 1, 1), last=dt.date(2000, 1, 3))


def test_tokenizer_round_trip_and_specials():
    tok = DateTokenizer()
    assert tok.itos[:3] == ["<pad>", "<bos>", "<eos>"]
    assert (tok.pad_id, tok.bos_id, tok.eos_id) == (0, 1, 2)
    letters = set("JanFebMarAprMayJunJulAugSepOctNovDec")
    assert tok.vocab_size == len(set(tok.itos)) == 3 + 10 + 2 + len(letters) == 37
    ids = tok.encode("30 Nov 2026", eos=True)
    assert len(ids) == 12 and ids[-1] == tok.eos_id
    assert tok.decode([tok.bos_id] + ids + [tok.pad_id, 5]) == "30 Nov 2026"  # stops at eos
    assert tok.tokens(ids[:3]) == ["3", "0", " "]
    with pytest.raises(ValueError, match="'x' at position 0"):
        tok.encode("x")
    with pytest.raises(ValueError, match="vocab_size=37"):
        tok.decode([37])


def test_encode_pairs_shapes_and_padding():
    tok = DateTokenizer()
    src, tgt = tok.encode_pairs(date_pairs(4) + [("1 Jan 2000", "2000-01-01")])
    assert src.shape == (5, 11) and tgt.shape == (5, 11) and src.dtype == torch.long
    assert (tgt[:, -1] == tok.eos_id).all() and src[-1, -1] == tok.pad_id
    assert tok.decode(tgt[0].tolist()) == date_pairs(4)[0][1]
