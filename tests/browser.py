"""A real headless browser for page tests: Debian's Chromium driven by Selenium."""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
# skipped on a machine without them, but never in CI, where infra/setup.sh installs them
needs_browser = pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER) and not os.environ.get("CI"),
                                   reason="needs Debian's chromium and chromium-driver (infra/setup.sh installs them)")


@contextmanager
def headless_chromium(tmp_path: Path):
    """A driver with its own profile and downloads folder under `tmp_path`."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--window-size=1200,900",
                 f"--user-data-dir={tmp_path / 'profile'}"):
        options.add_argument(flag)
    options.add_experimental_option("prefs", {"download.default_directory": str(tmp_path / "downloads"),
                                              "download.prompt_for_download": False})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.implicitly_wait(2)
    try:
        yield driver
    finally:
        driver.quit()
