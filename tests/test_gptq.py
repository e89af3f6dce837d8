"""gptq_quantize: GPTQ's column-by-column rounding with error compensation (Frantar et al. 2022)."""
from __future__ import annotations

import pytest
import torch

from attnlib import gptq_quantize, quantize_rows


def correlated(n, d, gen):
    """Inputs whose features co-vary, as a layer's real inputs do."""
    mix = torch.randn(d, d, generator=gen) / d ** 0.5
    return torch.randn(n, d, generator=gen) @ mix + 0.3 * torch.randn(n, d, generator=gen)


def obq_reference(W, X, bits, damp=0.01):
    """The same rounding with H^-1 updated explicitly after each column (the Optimal Brain
    Quantizer's form, which GPTQ's Cholesky rows reproduce), in float64."""
    W = W.double().clone()
    _, scale = quantize_rows(W.float(), bits)
    s, top = scale.double()[:, 0], 2 ** (bits - 1) - 1
    H = 2 * X.double().T @ X.double()
    H += damp * H.diagonal().mean() * torch.eye(H.shape[0], dtype=H.dtype)
    Hinv = torch.linalg.inv(H)
    Q = torch.zeros_like(W)
    for j in range(W.shape[1]):
        Q[:, j] = torch.round(W[:, j] / s).clamp(-top, top) * s
        err = (W[:, j] - Q[:, j]) / Hinv[j, j]
        W[:, j + 1:] -= err[:, None] * Hinv[j, j + 1:][None, :]
        Hinv = Hinv - Hinv[:, j:j + 1] @ Hinv[j:j + 1, :] / Hinv[j, j]   # j is fixed now
    return Q.float()


@pytest.mark.parametrize("bits", [3, 4, 8])
def test_equals_the_explicit_inverse_updates(bits):
    gen = torch.Generator().manual_seed(bits)
    W, X = torch.randn(6, 10, generator=gen), correlated(50, 10, gen)
    torch.testing.assert_close(gptq_quantize(W, X, bits), obq_reference(W, X, bits),
                               rtol=1e-5, atol=1e-5)


def test_on_the_grid_and_better_than_round_to_nearest():
    gen = torch.Generator().manual_seed(0)
    W, X_all = torch.randn(32, 48, generator=gen), correlated(800, 48, gen)
    X, X_new = X_all[:400], X_all[400:]                      # calibration, and held out
    q, scale = quantize_rows(W, 4)
    rtn = q.float() * scale
    gptq = gptq_quantize(W, X, 4)
    codes = gptq / scale
    assert torch.allclose(codes, codes.round(), atol=1e-4) and codes.abs().max() <= 7 + 1e-4
    err = lambda Wq, X_: ((X_ @ (Wq - W).T).norm() / (X_ @ W.T).norm()).item()
    assert err(gptq, X) < 0.85 * err(rtn, X)                  # on the calibration inputs
    assert err(gptq, X_new) < err(rtn, X_new)                 # and on others like them
    assert not torch.equal(gptq, rtn)


def test_uncorrelated_features_need_no_compensation():
    """With H diagonal (features that never co-vary), U is diagonal: nothing is passed on and
    GPTQ is round-to-nearest."""
    W = torch.randn(5, 4, generator=torch.Generator().manual_seed(1))
    X = torch.diag(torch.tensor([1.0, 2.0, 0.5, 3.0]))       # H = 2 X^T X is diagonal
    q, scale = quantize_rows(W, 4)
    torch.testing.assert_close(gptq_quantize(W, X, 4), q.float() * scale)


def test_refusals():
    with pytest.raises(ValueError, match="inputs \\(N, d_in\\)"):
        gptq_quantize(torch.randn(3, 4), torch.randn(5, 3))
    with pytest.raises(ValueError, match="damp"):
        gptq_quantize(torch.randn(3, 4), torch.randn(5, 4), damp=-1)
    with pytest.raises(ValueError, match="bits"):
        gptq_quantize(torch.randn(3, 4), torch.randn(5, 4), bits=9)
