"""GPTQ (Frantar et al., 2022): rounding one column at a time, and compensating each rounding
error in the columns not yet rounded.

Round-to-nearest (RTN) rounds every weight on its own. But what a layer is judged by is its output
``X W^T`` on the inputs it will see; GPTQ uses calibration inputs X (N, d_in) to weigh the errors
by how the inputs co-vary (the Hessian of the squared output error, ``H = 2 X^T X``). Column j is
rounded to the grid, and its error, scaled by ``1 / U_jj``, is subtracted from the later columns in
proportion to ``U_j,j+1:``, where U is the upper Cholesky factor of ``H^-1`` (the paper's
Algorithm 1, without its lazy batching of the updates). The grid is the one RTN uses: symmetric,
one scale per output row, as :func:`attnlib.quant.quantize_rows`, so the two differ only in which
grid point each weight takes.
"""
from __future__ import annotations

import torch
from torch import Tensor

from .quant import quantize_rows


def gptq_quantize(weight: Tensor, inputs: Tensor, bits: int = 4, *,
                  damp: float = 0.01) -> Tensor:
    """The weight rounded column by column onto its per-row ``bits``-bit grid, GPTQ-style.

    Args:
        weight: (d_out, d_in), an ``nn.Linear`` weight.
        inputs: (N, d_in) calibration inputs of that layer (N >= 1 rows).
        bits: 2..8, the per-row symmetric grid of :func:`attnlib.quant.quantize_rows`.
        damp: added to H's diagonal, as a fraction of its mean (the paper's 1%), so that H^-1
            exists when inputs are few or some features never vary.

    Returns:
        (d_out, d_in) float32, every weight on its row's grid (``scale * integer``).
    """
    if not (isinstance(weight, Tensor) and isinstance(inputs, Tensor)) or weight.dim() != 2 \
            or inputs.dim() != 2 or inputs.shape[1] != weight.shape[1] or inputs.shape[0] < 1:
        got = [tuple(t.shape) if isinstance(t, Tensor) else type(t).__name__
               for t in (weight, inputs)]
        raise ValueError(f"gptq_quantize needs weight (d_out, d_in) and inputs (N, d_in) with "
                         f"N >= 1, got {got[0]} and {got[1]}")
    for name, t in (("weight", weight), ("inputs", inputs)):
        if not bool(torch.isfinite(t).all()):  # H's Cholesky factor would fail, far from here
            raise ValueError(f"{name} holds NaN or inf: GPTQ needs finite weights and "
                             f"calibration inputs")
    if not 0 <= damp < 1e3:
        raise ValueError(f"damp must be a non-negative fraction of H's mean diagonal, got {damp}")
    W = weight.detach().float().clone()                                  # (d_out, d_in)
    _, scale = quantize_rows(W, bits)                                    # (d_out, 1): RTN's grid
    top = 2 ** (bits - 1) - 1
    safe = torch.where(scale == 0, torch.ones_like(scale), scale)[:, 0]  # an all-zero row: q = 0
    X = inputs.detach().double()
    H = 2 * X.T @ X                                                      # (d_in, d_in)
    H += damp * H.diagonal().mean().clamp_min(1e-12) * torch.eye(H.shape[0], dtype=H.dtype)
    U = torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(H)), upper=True)
    U = U.float()                                                        # upper factor of H^-1
    Q = torch.zeros_like(W)
    for j in range(W.shape[1]):
        w = W[:, j]                                                      # (d_out,)
        Q[:, j] = torch.round(w / safe).clamp(-top, top) * safe          # the nearest grid point
        err = (w - Q[:, j]) / U[j, j]
        W[:, j + 1:] -= err[:, None] * U[j, j + 1:][None, :]             # the later columns pay
    return Q
