"""The README's attnlib example runs exactly as written, and prints what its comments claim."""
from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def readme_example() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## `attnlib` in ten lines", 1)
    assert len(section) == 2, "README.md lost its '## `attnlib` in ten lines' section"
    blocks = re.findall(r"```python\n(.*?)```", section[1], re.DOTALL)
    assert blocks, "no ```python block in the README example section"
    return blocks[0]


def test_readme_example_is_short():
    code = [line for line in readme_example().splitlines() if line.strip() and not line.startswith("import")]
    assert len(code) <= 12, f"the README example grew to {len(code)} lines"


def test_readme_example_runs():
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compile(readme_example(), "README.md", "exec"), {"__name__": "readme"})
    lines = buf.getvalue().splitlines()
    assert lines[0] == "[(1, 4, 28, 28), (1, 4, 28, 28)]", lines[0]
    assert lines[1] == f"28 {2 * 2 * 28 * 64 * 4}", lines[1]   # seq_len, nbytes as the comment says
    assert lines[2].startswith("In the beginning God created") and len(lines[2]) == 28 + 20, lines[2]
