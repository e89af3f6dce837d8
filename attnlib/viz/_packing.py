"""The explorers' numbers as they travel to the page: every value rounded to ``digits``
decimals and stored as an integer ``round(value * 10**digits)`` (offset by the
smallest one), packed into little-endian uint8/16/32 and base64-encoded; -inf, +inf
and NaN are the three largest codes. ``decode_payload`` is the inverse, what the
browser does."""
from __future__ import annotations

import base64
from typing import Any, Mapping

import numpy as np

_NEG_INF, _POS_INF, _NAN = 0, 1, 2  # sentinels count down from the dtype's maximum


def _encode(arr: np.ndarray, digits: int) -> dict[str, Any]:
    """Quantise to ``digits`` decimals and pack as base64 little-endian unsigned ints."""
    scale = 10.0 ** digits
    finite = np.isfinite(arr)
    biggest = float(np.abs(arr[finite]).max()) if finite.any() else 0.0
    # beyond this, integers (int64 here, doubles in JS) are not exact
    if biggest * scale > 2.0 ** 53:
        raise ValueError(f"values up to {biggest:g} cannot be held exactly at digits={digits} "
                         "(the payload stores value * 10**digits as an integer below 2**53); "
                         "pass fewer digits or rescale the data")
    q = np.zeros(arr.shape, dtype=np.int64)
    q[finite] = np.round(arr[finite] * scale).astype(np.int64)
    base = int(q[finite].min()) if finite.any() else 0
    span = (int(q[finite].max()) - base) if finite.any() else 0
    for nbytes, dtype in ((1, "<u1"), (2, "<u2"), (4, "<u4")):
        top = 2 ** (8 * nbytes) - 1
        if span <= top - 3:
            break
    else:
        raise ValueError(f"values span {span / scale:g} which at digits={digits} needs more than "
                         "32 bits per value; pass fewer digits")
    packed = (q - base).astype(np.int64)
    packed[np.isneginf(arr)] = top - _NEG_INF
    packed[np.isposinf(arr)] = top - _POS_INF
    packed[np.isnan(arr)] = top - _NAN
    raw = packed.astype(dtype).tobytes(order="C")
    return {"base": base, "bytes": nbytes, "data": base64.b64encode(raw).decode("ascii")}


def decode_payload(payload: Mapping[str, Any], example: int = 0) -> np.ndarray:
    """Inverse of the packing (what the browser does): the (*leading, Tq, Tk) values of one
    example."""
    ex = payload["examples"][example]
    nbytes = ex["bytes"]
    raw = np.frombuffer(base64.b64decode(ex["data"]),
                        dtype={1: "<u1", 2: "<u2", 4: "<u4"}[nbytes])
    top = 2 ** (8 * nbytes) - 1
    out = (raw.astype(np.float64) + ex["base"]) / 10.0 ** payload["digits"]
    out[raw == top - _NEG_INF] = -np.inf
    out[raw == top - _POS_INF] = np.inf
    out[raw == top - _NAN] = np.nan
    shape = [len(d["labels"]) for d in payload["dims"]] + [len(ex["rows"]), len(ex["cols"])]
    return out.reshape(shape)
