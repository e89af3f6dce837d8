"""``exercise``: a self-grading exercise that works in the static page. The reader
enters an answer (a number, a shape or a choice), a Check button says right or wrong
against the value the notebook computed (passed in from Python), then reveals the
explanation. No kernel: attnlib/viz/exercise.js parses the answer (numbers may be
written as arithmetic, 1/sqrt(3); shapes as (2, 4, 5), 2x4x5 or torch.Size([2, 4, 5]))
and compares it. Where scripts do not run, the question shows with the answer folded in
a <details> element."""
from __future__ import annotations

import html
import math
from typing import Any, Optional, Sequence

from .._checks import as_int, as_real
from ._kit import KitOutput

__all__ = ["exercise"]

KINDS = ("number", "shape", "choice")


class Exercise(KitOutput):
    ROOT = "attnlib-exercise"


def _inline(text: str) -> str:
    """Plain text with `code` spans, escaped."""
    parts = str(text).split("`")
    return "".join(f"<code>{html.escape(p)}</code>" if i % 2 else html.escape(p)
                   for i, p in enumerate(parts))


def exercise(question: str, answer: Any, *, kind: Optional[str] = None,
             choices: Optional[Sequence[str]] = None, tolerance: Optional[float] = None,
             explanation: str = "", hint: Optional[str] = None,
             title: str = "Check yourself", unit: str = "") -> KitOutput:
    """A question the page grades.

    Args:
        question: the question (plain text; `backticks` mark code).
        answer: what the notebook computed: a number, a shape (tuple / list / torch.Size of
            ints), or, with ``choices``, the right choice (its index or its text).
        kind: "number", "shape" or "choice" (default: from ``answer`` and ``choices``).
        choices: the options of a choice question.
        tolerance: for numbers, the largest accepted |entered - answer| (default 0.005 x
            max(1, |answer|), so 0.58 and 0.577 both pass for 1/sqrt(3) = 0.5774).
        explanation: shown once the answer is right, or revealed (plain text with `code`).
        hint: shown after a wrong answer; title: the box's heading; unit: shown after the input.

    Returns:
        An output to display.
    """
    if not isinstance(question, str) or not question.strip():
        raise TypeError(f"question must be a non-empty str, got {question!r}")
    if kind is None:
        kind = ("choice" if choices is not None
                else "shape" if isinstance(answer, (tuple, list)) else "number")
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    payload: dict[str, Any] = {"v": 1, "kind": kind, "question": str(question),
                               "explanation": str(explanation),
                               "hint": None if hint is None else str(hint), "title": str(title),
                               "unit": str(unit)}
    if kind == "number":
        if hasattr(answer, "item"):
            answer = answer.item()
        x = as_real(answer)
        if x is None or not math.isfinite(x):
            raise ValueError(f"a number exercise needs a finite number as its answer, "
                             f"got {answer!r}")
        tol = 0.005 * max(1.0, abs(x)) if tolerance is None else as_real(tolerance)
        if tol is None or not tol >= 0:
            raise ValueError(f"tolerance must be a number >= 0, got {tolerance!r}")
        payload.update(answer=float(x), tolerance=float(tol))
        shown = f"{x:.4g}"
    elif kind == "shape":
        dims = [as_int(d) for d in tuple(answer)]
        if not dims or any(d is None or d < 0 for d in dims):
            raise ValueError(f"a shape exercise needs a shape of ints >= 0 as its answer, "
                             f"got {answer!r}")
        payload["answer"] = dims
        shown = "(" + ", ".join(str(d) for d in dims) + (",)" if len(dims) == 1 else ")")
    else:
        if isinstance(choices, str):  # list("abc") would make three one-letter choices
            raise TypeError(f"choices must be a list of options, got one str {choices!r}")
        if not choices or len(choices) < 2:
            raise ValueError(f"a choice exercise needs at least two choices, got {choices!r}")
        opts = [str(c) for c in choices]
        idx = (as_int(answer) if not isinstance(answer, str)
               else (opts.index(answer) if answer in opts else None))
        if idx is None or not 0 <= idx < len(opts):
            raise ValueError(f"answer must be one of the choices (its index or its text), "
                             f"got {answer!r}")
        payload.update(choices=opts, answer=int(idx))
        shown = opts[idx]
    still = (f"<p style='margin:0 0 4px'><b>{html.escape(title)}.</b> {_inline(question)}</p>"
             + ("<ol style='margin:0 0 4px'>"
                + "".join(f"<li>{_inline(c)}</li>" for c in payload["choices"]) + "</ol>"
                if kind == "choice" else "")
             + f"<details><summary>Answer (scripts do not run here, so the page cannot check "
               f"yours)</summary>"
               f"<p>{html.escape(shown)}{(' ' + html.escape(unit)) if unit else ''}. "
               f"{_inline(explanation)}</p></details>")
    summary = f"Exercise({kind}, {question[:40]!r})"
    return Exercise("exercise", payload, still, title, summary, scripts=("kit.js",))
