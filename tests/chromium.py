"""Headless Chromium for the browser tests: Debian's chromium and chromium-driver, offline.

``.ci/run`` installs both; nothing is downloaded at test time. Without them a test is skipped,
except under CI, where it fails.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1440,900",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",  # nothing leaves the machine
]


def require(what: str) -> None:
    """Skip the test (fail it under CI) with ``what`` as the reason."""
    if os.environ.get("CI"):
        pytest.fail(what)
    pytest.skip(what)


@contextlib.contextmanager
def chromium(profile: Path, *, network_log: bool = False) -> Iterator[webdriver.Chrome]:
    """A headless Chromium with its profile in ``profile``; ``network_log`` records requests."""
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        require("Debian's chromium and chromium-driver are not installed (.ci/run installs them)")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in [*FLAGS, f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    if network_log:
        options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    service = Service(executable_path=str(CHROMEDRIVER))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SE_OFFLINE", "true")  # selenium-manager must never download anything
        driver = webdriver.Chrome(options=options, service=service)
    try:
        yield driver
    finally:
        driver.quit()
