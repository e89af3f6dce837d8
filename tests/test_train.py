"""The tiny training loop: shifted targets, batches from a corpus, a loss that goes down."""
import math
from types import SimpleNamespace

import pytest
import torch
from torch import nn

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
