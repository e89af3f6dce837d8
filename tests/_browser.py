"""Where the headless browser is, for every browser test: skipped on a reader's machine without it,
a failure under CI=true (CI skips nothing)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("ATTNLIB_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("ATTNLIB_CHROMEDRIVER", "/usr/bin/chromedriver")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require_browser() -> tuple[str, str]:
    """(chromium, chromedriver) paths; call at module level of a browser test file."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists()]
    if missing:
        why = (f"headless browser check needs {' and '.join(missing)} "
               "(apt-get install chromium chromium-driver, or set ATTNLIB_CHROMIUM / ATTNLIB_CHROMEDRIVER)")
        if IN_CI:
            pytest.fail(why, pytrace=False)
        pytest.skip(why, allow_module_level=True)
    return CHROMIUM, CHROMEDRIVER
