"""Where the headless browser is, for every browser test: skipped on a reader's machine without it,
a failure under CI=true (CI skips nothing)."""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
from pathlib import Path
from typing import Any, Iterator

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


@contextlib.contextmanager
def chromium_driver(window: str = "900,1000") -> Iterator[Any]:
    """A headless Chromium (selenium) with this machine's flags, browser and network logs on, and a
    throwaway profile; quit and cleaned up on exit."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, chromedriver = require_browser()
    opts = webdriver.ChromeOptions()
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--window-size={window}", "--force-device-scale-factor=1"):
        opts.add_argument(flag)
    profile = tempfile.mkdtemp(prefix="attnlib-chrome-")
    opts.add_argument(f"--user-data-dir={profile}")
    opts.binary_location = chromium
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    d = webdriver.Chrome(service=Service(chromedriver), options=opts)
    try:
        yield d
    finally:
        d.quit()
        shutil.rmtree(profile, ignore_errors=True)


def port_open(port: int) -> bool:
    """Whether a server answers on 127.0.0.1:port (a server started by a test)."""
    try:
        socket.create_connection(("127.0.0.1", port), 1).close()
        return True
    except OSError:
        return False
