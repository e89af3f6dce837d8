"""attnlib.realwords: the word list, the share of real words, and samples longer than max_len."""
from __future__ import annotations

import pytest
import torch

import attnlib
from attnlib.realwords import generate_long, real_word_share, sample_texts, words_of

torch.set_num_threads(1)


def test_words_and_the_share_of_real_ones():
    words = words_of("In the beginning God created the heaven.\nAnd God's")
    assert words == {"in", "the", "beginning", "god", "created", "heaven", "and", "s"}
    # complete words only (the unfinished last one is not counted), case ignored
    assert real_word_share(["GOD the heavn and beginn"], words) == (3, 4)
    assert real_word_share(["the", "x"], words) == (0, 0)
    assert real_word_share([" the, god: crated. "], words) == (2, 3)
    with pytest.raises(TypeError, match="list of strings"):
        real_word_share("the god ", words)


def tiny(max_len=16):
    tok = attnlib.CharTokenizer("ab c\n")
    cfg = attnlib.TransformerConfig(vocab_size=tok.vocab_size, d_model=8, n_heads=2, n_layers=1,
                                    max_len=max_len)
    torch.manual_seed(0)
    return attnlib.GPT(cfg).eval(), tok


def test_generate_long_is_generate_within_max_len_and_slides_past_it():
    model, tok = tiny()
    ids = torch.tensor([tok.encode("ab c"), tok.encode("ba c")])  # (2, 4)
    want = model.generate(ids, 12, temperature=0.9, use_cache=False,
                          generator=torch.Generator().manual_seed(3))
    got = generate_long(model, ids, 12, temperature=0.9, generator=torch.Generator().manual_seed(3))
    assert torch.equal(got, want)  # 4 + 12 = max_len: the same draws
    long = generate_long(model, ids, 40, temperature=0.0)  # past max_len: the last 16 tokens read
    assert long.shape == (2, 44) and torch.equal(long[:, :4], ids)
    seq = long[:1, :30]
    with torch.no_grad():
        nxt = int(model(seq[:, -16:]).logits[0, -1].argmax())
    assert nxt == int(long[0, 30])
    with pytest.raises(ValueError, match=r"\(B, T\)"):
        generate_long(model, ids[0], 3)


def test_sample_texts_are_seeded_and_leave_the_prompt_out():
    model, tok = tiny()
    a = sample_texts(model, tok, "ab", 30, n_samples=3, seed=1)
    assert a == sample_texts(model, tok, "ab", 30, n_samples=3, seed=1)
    assert len(a) == 3 and all(len(s) == 30 for s in a) and len(set(a)) > 1
    assert a != sample_texts(model, tok, "ab", 30, n_samples=3, seed=2)
