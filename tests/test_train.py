"""The tiny training loop: shifted targets, batches from a corpus, a loss that goes down."""
import math
from types import SimpleNamespace

import pytest
import torch
from torch import nn

import attnlib
from attnlib.train import sample_batch, shift_targets, train

V = 8


class Bigram(nn.Module):
    """Logits for the next token from the current token alone (enough for a +1 mod V corpus)."""

    def __init__(self, vocab: int = V, wrap: bool = False) -> None:
        super().__init__()
        self.table = nn.Embedding(vocab, vocab)
        self.wrap = wrap

    def forward(self, ids):
        logits = self.table(ids)  # (B, T, V)
        return SimpleNamespace(logits=logits) if self.wrap else logits


def counting_corpus(n: int = 400) -> torch.Tensor:
    return torch.arange(n) % V  # 0 1 2 ... 7 0 1 ...: the next token is (x + 1) mod V


def test_shift_targets():
    ids = torch.tensor([[1, 2, 3, 4], [5, 6, 7, 8]])
    x, y = shift_targets(ids)
    assert torch.equal(x, torch.tensor([[1, 2, 3], [5, 6, 7]]))
    assert torch.equal(y, torch.tensor([[2, 3, 4], [6, 7, 8]]))


def test_sample_batch_windows_are_contiguous():
    corpus = torch.arange(100)
    g = torch.Generator().manual_seed(1)
    batch = sample_batch(corpus, 5, 6, g)
    assert batch.shape == (5, 7)
    assert torch.equal(batch[:, 1:] - batch[:, :-1], torch.ones(5, 6, dtype=torch.long))
    seqs = torch.arange(30).view(10, 3)
    rows = sample_batch(seqs, 4, None, g)
    assert rows.shape == (4, 3) and all(any(torch.equal(r, s) for s in seqs) for r in rows)
    assert sample_batch(lambda gen: torch.zeros(2, 5, dtype=torch.long), 9, None, g).shape == (2, 5)


@pytest.mark.parametrize("wrap", [False, True])
def test_loss_goes_down_to_near_zero_on_a_learnable_task(wrap):
    torch.manual_seed(0)
    model = Bigram(wrap=wrap).eval()
    history = train(model, counting_corpus(), steps=150, batch_size=8, block_size=10, lr=0.1)
    assert len(history) == 150 and all(isinstance(h, float) for h in history)
    assert abs(history[0] - math.log(V)) < 1.0  # starts near chance
    assert history[-1] < 0.05
    out = model(torch.arange(V)[None])
    pred = (out.logits if wrap else out).argmax(-1)[0]
    assert torch.equal(pred, (torch.arange(V) + 1) % V)  # it learned the NEXT token, not a copy
    assert not model.training  # the mode it had before the call


def test_reproducible_with_a_seeded_generator():
    runs = []
    for _ in range(2):
        torch.manual_seed(0)
        runs.append(train(Bigram(), counting_corpus(), steps=5, block_size=4,
                          generator=torch.Generator().manual_seed(3)))
    assert runs[0] == runs[1]


def test_bad_arguments():
    with pytest.raises(ValueError, match="steps"):
        train(Bigram(), counting_corpus(), steps=0, block_size=4)
    with pytest.raises(ValueError, match="block_size"):
        train(Bigram(), counting_corpus(), steps=1)
    with pytest.raises(ValueError, match="5 tokens, fewer than block_size \\+ 1 = 11"):
        train(Bigram(), torch.arange(5), steps=1, block_size=10)
    with pytest.raises(TypeError, match="integer"):
        shift_targets(torch.zeros(2, 3))
    with pytest.raises(ValueError, match=r"\(2, 1\)"):
        shift_targets(torch.zeros(2, 1, dtype=torch.long))
    with pytest.raises(ValueError, match="logits"):
        train(lambda_model(), counting_corpus(), steps=1, block_size=4)


def lambda_model():
    class Bad(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.zeros(V))

        def forward(self, ids):
            return self.w.expand(ids.shape[0], 1, V)  # wrong length T

    return Bad()


# ---------------------------------------------------------------- encoder-decoders (teacher forcing)

from attnlib.train import teacher_forcing  # noqa: E402

BOS = 1


def test_teacher_forcing_shifts_right_behind_bos():
    tgt = torch.tensor([[5, 6, 7, 2], [3, 4, 2, 0]])  # 2 = eos, 0 = pad
    dec_in, targets = teacher_forcing(tgt, BOS)
    assert torch.equal(dec_in, torch.tensor([[1, 5, 6, 7], [1, 3, 4, 2]]))
    assert torch.equal(targets, tgt)  # position t is scored on token t, having read tokens < t
    assert dec_in.shape == targets.shape == (2, 4) and dec_in.dtype == torch.long
    with pytest.raises(TypeError, match="integer"):
        teacher_forcing(tgt.float(), BOS)
    with pytest.raises(ValueError, match=r"\(4,\)"):
        teacher_forcing(tgt[0], BOS)


class Recorder(nn.Module):
    """Remembers what train() feeds it; its logits are confident in ``answers[src row]``."""

    def __init__(self, answers):
        super().__init__()
        self.answers = answers  # (N, T): the token each position should predict
        self.w = nn.Parameter(torch.zeros(()))
        self.calls = []

    def forward(self, src, dec_in, src_attention_mask=None):
        self.calls.append((src.clone(), dec_in.clone(), src_attention_mask))
        want = self.answers[src[:, 0]]  # (B, T): row i of the data has src[i, 0] == i
        return 100.0 * F.one_hot(want, V).float() + self.w


def pair_data(n=6, T=4):
    src = torch.arange(n)[:, None].repeat(1, 3)  # (N, 3): row i is [i, i, i]
    tgt = (torch.arange(n)[:, None] + torch.arange(T)) % (V - 2) + 2  # ids in [2, V)
    return src, tgt


import torch.nn.functional as F  # noqa: E402


def test_pairs_are_fed_shifted_and_scored_unshifted():
    src, tgt = pair_data()
    rec = Recorder(tgt)
    history = train(rec, (src, tgt), steps=3, batch_size=5, bos_id=BOS)
    assert len(rec.calls) == 3 and max(history) < 1e-6  # confident in tgt itself: loss ~ 0
    for s, dec_in, mask in rec.calls:
        rows = s[:, 0]
        assert s.shape == (5, 3) and dec_in.shape == (5, 4) and mask is None
        assert torch.equal(dec_in[:, 0], torch.full((5,), BOS))
        assert torch.equal(dec_in[:, 1:], tgt[rows, :-1])
    # scored against the shifted-left target instead, the same model is confidently wrong
    rec_wrong = Recorder(torch.roll(tgt, -1, dims=1))
    assert min(train(rec_wrong, (src, tgt), steps=1, batch_size=5, bos_id=BOS)) > 10


class BigramDecoder(nn.Module):
    """Predicts target token t from decoder input t alone (ignores the source)."""

    def __init__(self):
        super().__init__()
        self.table = nn.Embedding(V, V)

    def forward(self, src, dec_in):
        return self.table(dec_in)  # (B, T, V)


def test_shift_by_one_is_what_gets_learned():
    # every target counts up by one: y_t = y_{t-1} + 1. With decoder input [bos, y_0, ...] the
    # bigram must learn x -> x + 1; a shift off by one would teach it x -> x or x -> x + 2.
    src, tgt = pair_data(n=6, T=5)
    torch.manual_seed(0)
    model = BigramDecoder()
    history = train(model, (src, tgt), steps=200, batch_size=8, lr=0.1, bos_id=BOS)
    assert history[-1] < history[0] / 2
    seen = tgt[:, :-1].unique()
    pred = model.table(seen).argmax(-1)
    assert torch.equal(pred, (seen - 2 + 1) % (V - 2) + 2)


def test_padding_is_masked_and_left_out_of_the_loss():
    src, tgt = pair_data()
    src[:, -1] = 0
    tgt[:, -1] = 0  # pad id 0 in the last column of both
    wrong_on_pad = tgt.clone()
    wrong_on_pad[:, -1] = 3  # the model is confidently wrong exactly at the padded targets
    rec = Recorder(wrong_on_pad)
    history = train(rec, (src, tgt), steps=2, batch_size=4, bos_id=BOS, pad_id=0)
    assert max(history) < 1e-6  # padded positions are ignored
    assert train(Recorder(wrong_on_pad), (src, tgt), steps=1, batch_size=4, bos_id=BOS)[0] > 10
    s, _, mask = rec.calls[0]
    assert torch.equal(mask, (s != 0).long())


def test_encoder_decoder_learns_to_reverse():
    import attnlib

    g = torch.Generator().manual_seed(0)
    src = torch.randint(3, 10, (256, 5), generator=g)
    tgt = torch.cat([src.flip(1), torch.full((256, 1), 2)], dim=1)  # reversed, then eos 2
    torch.manual_seed(0)
    cfg = attnlib.TransformerConfig(vocab_size=10, d_model=32, n_heads=2, n_layers=1, max_len=8)
    model = attnlib.EncoderDecoder(cfg)
    steps = []
    history = train(model, (src, tgt), steps=160, batch_size=32, lr=5e-3, bos_id=BOS,
                    callback=lambda step, loss: steps.append((step, loss)))
    assert abs(history[0] - math.log(10)) < 0.5
    assert sum(history[-10:]) / 10 < 0.1 * history[0]
    assert steps == list(zip(range(1, 161), history))
    out = model.generate(src[:64], 6, bos_id=BOS, eos_id=2)
    assert out.shape == (64, 7) and (out[:, 1:] == tgt[:64]).all(1).float().mean() > 0.5


def test_pair_errors():
    src, tgt = pair_data()
    with pytest.raises(ValueError, match="bos_id"):
        train(Recorder(tgt), (src, tgt), steps=1)
    with pytest.raises(ValueError, match="6 rows but tgt_ids has 5"):
        train(Recorder(tgt), (src, tgt[:5]), steps=1, bos_id=BOS)
    with pytest.raises(ValueError, match="two 2-D"):
        train(Recorder(tgt), (src, tgt, tgt), steps=1, bos_id=BOS)


def _gpts(n: int, **over) -> list:
    out = []
    for seed in range(n):
        torch.manual_seed(seed)
        cfg = attnlib.TransformerConfig(vocab_size=20, d_model=16, n_heads=2, n_layers=1, max_len=16, **over)
        out.append(attnlib.GPT(cfg))
    return out


def test_train_many_equals_training_one_after_another():
    data = torch.randint(0, 20, (400,), generator=torch.Generator().manual_seed(5))
    kw = dict(steps=15, batch_size=4, block_size=8, lr=1e-2)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        alone = _gpts(3)
        hist_alone = [attnlib.train(m, data, generator=torch.Generator().manual_seed(s), **kw)
                      for s, m in zip((7, 8, 9), alone)]
    finally:
        torch.set_num_threads(threads)
    many = _gpts(3)
    hist_many = attnlib.train_many(many, data, seeds=(7, 8, 9), workers=2, **kw)
    assert torch.get_num_threads() == threads  # put back
    assert hist_many == hist_alone
    for a, b in zip(alone, many):
        assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert hist_many[0] != hist_many[1]  # the seeds differ, so do the runs


def test_train_many_refuses_what_would_race():
    data = torch.randint(0, 20, (200,))
    kw = dict(steps=1, batch_size=2, block_size=4)
    a, b = _gpts(2)
    with pytest.raises(ValueError, match="one int per model"):
        attnlib.train_many([a, b], data, seeds=[0], **kw)
    with pytest.raises(ValueError, match="appears twice"):
        attnlib.train_many([a, a], data, seeds=[0, 1], **kw)
    with pytest.raises(TypeError, match="not generator"):
        attnlib.train_many([a, b], data, seeds=[0, 1], generator=torch.Generator(), **kw)
    with pytest.raises(ValueError, match="dropout"):
        attnlib.train_many(_gpts(2, dropout=0.1), data, seeds=[0, 1], **kw)
    with pytest.raises(TypeError, match="non-empty list"):
        attnlib.train_many([], data, seeds=[], **kw)
    with pytest.raises(ValueError, match="workers"):
        attnlib.train_many([a, b], data, seeds=[0, 1], workers=0, **kw)
    with pytest.raises(ValueError, match="steps"):  # train's own checks still speak
        attnlib.train_many([a, b], data, seeds=[0, 1], steps=0)


def test_fused_adamw_is_the_same_update_as_the_loop(monkeypatch):
    """train picks AdamW's fused kernel on the CPU; it is the loop's update up to float rounding."""
    asked = []
    real = torch.optim.AdamW
    monkeypatch.setattr(torch.optim, "AdamW", lambda *a, **k: asked.append(k.get("fused")) or real(*a, **k))
    (m,) = _gpts(1)
    attnlib.train(m, torch.randint(0, 20, (200,)), steps=2, batch_size=2, block_size=4)
    assert asked == [True]
    monkeypatch.undo()
    g = torch.Generator().manual_seed(3)
    start = [torch.randn(16, 8, generator=g), torch.randn(8, generator=g)]
    grads = [[torch.randn(p.shape, generator=g) for p in start] for _ in range(5)]
    results = []
    for fused in (True, False):
        params = [p.clone().requires_grad_() for p in start]
        opt = torch.optim.AdamW(params, lr=1e-2, weight_decay=0.1, fused=fused)
        for step_grads in grads:
            for p, gr in zip(params, step_grads):
                p.grad = gr.clone()
            opt.step()
        results.append(params)
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)
        assert not torch.equal(a, start[0] if a.dim() == 2 else start[1])  # it did update
