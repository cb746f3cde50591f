"""The annotation page in a real headless browser (Debian's Chromium via Selenium):
open the file from disk, answer as three annotators, reload (answers kept), export,
and score the exports."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from eric.humaneval.command import prepare_study, score_answers
from eric.humaneval.study import read_key
from tests.browser import headless_chromium, needs_browser

pytestmark = needs_browser


@pytest.fixture
def browser(tmp_path):
    with headless_chromium(tmp_path) as driver:
        yield driver


def _answer_all(driver, a_left: dict[str, bool]) -> None:
    """Informativeness: A's text; coherence: tie; entity issues: Text 1 yes, Text 2 no."""
    from selenium.webdriver.common.by import By

    for _ in a_left:
        item = driver.find_element(By.ID, "position").text.split("id ")[1].rstrip(")")
        side = "left" if a_left[item] else "right"
        for field, value in (("informativeness", side), ("coherence", "tie"),
                             ("entity_issue_left", "yes"), ("entity_issue_right", "no")):
            driver.find_element(By.CSS_SELECTOR, f"input[name={field}][value={value}]").click()
        if driver.find_element(By.ID, "next").is_enabled():
            driver.find_element(By.ID, "next").click()


def _wait_for(path_glob: Path, pattern: str, timeout: float = 10.0) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [p for p in path_glob.glob(pattern) if not p.name.endswith(".crdownload")]
        if found:
            return found[0]
        time.sleep(0.1)
    raise AssertionError(f"no download matching {pattern}")


def test_page_answers_persist_export_and_score(browser, tmp_path, params_file):
    from selenium.webdriver.common.by import By

    study, paths = prepare_study("eric", "bart", n=4, annotators=3, out=tmp_path / "study", params=params_file)
    key = read_key(paths["key"])
    a_left = {item["item_id"]: item["left"] == "a" for item in key.items}
    browser.get(paths["page"].resolve().as_uri())
    source = browser.page_source.lower()  # the systems are not named anywhere on the page
    assert "bart" not in source and "parquet" not in source and "sunny" in source
    assert browser.find_element(By.ID, "progress-text").text == "0 of 4 items answered"
    # no answering before a name is given
    assert not browser.find_element(By.CSS_SELECTOR, "input[name=coherence]").is_enabled()

    downloads = tmp_path / "downloads"
    for who in ("ann1", "ann2", "ann3"):
        name = browser.find_element(By.ID, "annotator")
        name.clear()
        name.send_keys(who)
        browser.find_element(By.ID, "start").click()
        browser.find_elements(By.CSS_SELECTOR, "#grid button")[0].click()
        _answer_all(browser, a_left)
        assert browser.find_element(By.ID, "progress-text").text == "4 of 4 items answered"
        if who == "ann1":  # kept in the browser: a reload restores name and answers
            browser.refresh()
            assert browser.find_element(By.ID, "progress-text").text == "4 of 4 items answered"
            assert browser.find_element(By.ID, "annotator").get_attribute("value") == "ann1"
        browser.find_element(By.ID, "export").click()
        exported = _wait_for(downloads, f"answers-{key.study_id}-{who}.json")
        shown = json.loads(browser.find_element(By.ID, "export-text").get_attribute("value"))
        assert json.loads(exported.read_text()) == shown
        assert shown["annotator"] == who and len(shown["answers"]) == 4

    results, _ = score_answers(sorted(downloads.glob("answers-*.json")), [paths["key"]], tmp_path / "scores",
                               mlflow=False)
    r = results[0]
    a_left_count = sum(a_left.values())
    assert r["items_scored"] == 4 and r["problems"] == {}
    assert (r["informativeness"]["win"], r["coherence"]["tie"]) == (100.0, 100.0)
    assert r["entity_issues"]["a"] == 100.0 * a_left_count / 4  # A has issues exactly where it was Text 1
    assert r["entity_issues"]["b"] == 100.0 * (4 - a_left_count) / 4
