"""The review web page in a real headless Chromium (Debian's chromium + chromium-driver, driven by Selenium):
a reviewer clears ten entries with the keyboard alone, the next run shows their statuses; an XSS payload does not
execute; a POST without the CSRF token is refused."""

from __future__ import annotations

import shutil
from pathlib import Path
from urllib.parse import urlencode

import pytest
from selenium import webdriver  # the `test` extra pins it: a missing selenium fails, never skips
from selenium.common.exceptions import NoAlertPresentException, StaleElementReferenceException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from citegate_assets.lib.review.reviews import read_reviews
from citegate_assets.pipeline import run_range

from .helpers import copy_run
from .services import require_program
from .test_review_web_http import PLAN, XSS_CLAIM, XSS_SPAN, Server, build_warehouse, rows

REVIEWER = "Kim Keys"


def chromium(chromedriver: str):
    """Headless Chromium from the Debian package; Selenium Manager never runs (both paths are given)."""
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("review-web-browser")
    build_warehouse(root)
    return root


@pytest.fixture
def browser(monkeypatch):
    monkeypatch.setenv("SE_OFFLINE", "true")  # Selenium Manager must not download a driver or a browser
    driver = chromium(require_program("chromedriver", "chromium-driver"))
    yield driver
    driver.quit()


@pytest.fixture
def site(built, tmp_path):
    copy_run(built, tmp_path)
    server = Server(tmp_path)
    yield server, tmp_path
    server.stop()


def keys(driver, *sequence: str) -> None:
    """Keys typed into whatever has the focus, as a person would: no element is clicked."""
    ActionChains(driver).send_keys(*sequence).perform()


def wait_for_new_entry(driver, old_id: str) -> None:
    # the old page's element goes stale if the navigation lands between finding it and reading it: look again
    WebDriverWait(driver, 10, ignored_exceptions=(StaleElementReferenceException,)).until(
        lambda d: d.find_elements(By.ID, "citation-id") and d.find_element(By.ID, "citation-id").text != old_id
    )


def sign_in_with_keyboard(driver, server: Server, path: str) -> None:
    """Opens `path` with the access token `citegate serve` printed, as its URL says; then the name is typed."""
    driver.get(f"{server.base}{path}{'&' if '?' in path else '?'}" + urlencode({"token": server.token}))
    WebDriverWait(driver, 10).until(ec.url_contains("/login"))
    assert "token" not in driver.current_url  # the token left the address bar at once
    keys(driver, REVIEWER, Keys.ENTER)  # the name field has the focus (autofocus)
    WebDriverWait(driver, 10).until(ec.presence_of_element_located((By.ID, "entries")))


def test_a_reviewer_clears_ten_entries_with_the_keyboard_and_the_next_run_applies_them(
    site, browser, dagster_home, monkeypatch
):
    server, root = site
    sign_in_with_keyboard(browser, server, "/?status=open")
    keys(browser, Keys.ENTER)  # opens the selected (first) row
    WebDriverWait(browser, 10).until(ec.presence_of_element_located((By.ID, "citation-id")))
    cleared: list[tuple[str, str, str | None, str | None]] = []
    for i in range(10):
        cid = browser.find_element(By.ID, "citation-id").text
        if i % 3 == 0:
            keys(browser, "a")
            cleared.append((cid, "accept", None, None))
        elif i % 3 == 1:
            keys(browser, "r", f"fix answer {i}", Keys.ENTER)  # r puts the focus in the repair note
            cleared.append((cid, "repair", None, f"fix answer {i}"))
        else:
            # e focuses the cause; "t" picks truncation by type-ahead; Enter moves to the note; Enter submits
            keys(browser, "e", "t", Keys.ENTER, f"cut at {i}", Keys.ENTER)
            cleared.append((cid, "escalate", "truncation", f"cut at {i}"))
        wait_for_new_entry(browser, cid)
        flash = browser.find_element(By.ID, "flash").text
        assert f"on {cid}: applies at the next run" in flash
    logged = [
        (r.citation_id, r.outcome, r.cause, r.note) for r in (line.review for line in read_reviews(server.reviews)) if r
    ]
    assert logged == cleared
    assert {line.review.reviewer for line in read_reviews(server.reviews) if line.review} == {REVIEWER}
    assert len({cid for cid, *_ in cleared}) == 10  # ten different entries, in queue order

    # the queue shows them decided at once; the next run applies them
    browser.get(f"{server.base}/?status=open")
    # the page as loaded (a loaded machine once gave an empty page_source right after get)
    WebDriverWait(browser, 10).until(lambda b: b.page_source.count("applies at the next run") >= 10)
    monkeypatch.setenv("CITEGATE_REVIEWS", str(server.reviews))
    assert run_range(PLAN, landing=root / "landing", warehouse=root / "w.duckdb", config_file=None).success
    expected_status = {"accept": "accepted", "repair": "repaired", "escalate": "escalated (truncation)"}
    browser.get(f"{server.base}/?status=decided")
    decided = {
        row.get_attribute("data-citation"): row.find_element(By.CSS_SELECTOR, "td.status").text
        for row in browser.find_elements(By.CSS_SELECTOR, "#entries tbody tr")
    }
    assert decided == {cid: expected_status[outcome] for cid, outcome, _, _ in cleared}  # no pending badge left
    browser.get(f"{server.base}/entry?" + urlencode({"id": cleared[1][0]}))
    history = browser.find_element(By.ID, "history").text
    assert f"{REVIEWER} · repair — fix answer 1 · applied" in history
    assert browser.find_elements(By.ID, "pending") == []
    published = dict(
        rows(root / "w.published.duckdb", "select citation_id, status from citation_queue where status <> 'open'")
    )
    assert published == {cid: expected_status[outcome].split(" ")[0] for cid, outcome, _, _ in cleared}


def test_an_xss_payload_in_a_claim_does_not_execute(site, browser):
    server, root = site
    [(cid,)] = rows(
        root / "w.published.duckdb",
        "select citation_id from citation_queue where request_id = 'xss-1' and span = $s",
        {"s": XSS_SPAN},
    )
    sign_in_with_keyboard(browser, server, "/?surface=test-surface")
    browser.get(f"{server.base}/entry?id={cid.replace('#', '%23')}")
    WebDriverWait(browser, 10).until(ec.presence_of_element_located((By.ID, "claim")))
    assert browser.find_element(By.ID, "claim").text == XSS_CLAIM  # shown as text
    assert browser.find_element(By.ID, "span").text == XSS_SPAN
    assert browser.execute_script("return window.__xss === undefined")  # none of the payloads ran
    assert browser.find_elements(By.CSS_SELECTOR, "main script, main img[onerror], main svg") == []
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018


def test_a_post_without_the_csrf_token_is_refused_in_the_browser(site, browser):
    server, root = site
    [(cid,)] = rows(root / "w.published.duckdb", "select citation_id from citation_queue order by 1 limit 1")
    sign_in_with_keyboard(browser, server, "/")
    status = browser.execute_async_script(
        """
        const done = arguments[arguments.length - 1];
        fetch('/decide', {method: 'POST', credentials: 'same-origin',
                          headers: {'Content-Type': 'application/x-www-form-urlencoded'},
                          body: new URLSearchParams({citation_id: arguments[0], outcome: 'accept'})})
          .then(r => done(r.status));
        """,
        cid,
    )
    assert status == 403
    assert read_reviews(server.reviews) == []
    # the same POST with the page's token goes through: the refusal was the token, not the session
    token = browser.execute_script("return document.querySelector('input[name=csrf]').value")
    status = browser.execute_async_script(
        """
        const done = arguments[arguments.length - 1];
        fetch('/decide', {method: 'POST', credentials: 'same-origin',
                          headers: {'Content-Type': 'application/x-www-form-urlencoded'},
                          body: new URLSearchParams(
                              {citation_id: arguments[0], outcome: 'accept', csrf: arguments[1]})})
          .then(r => done(r.status));
        """,
        cid,
        token,
    )
    assert status == 200
    assert [line.review.citation_id for line in read_reviews(server.reviews) if line.review] == [cid]


HEADER_COLOUR = "return getComputedStyle(document.querySelector('header')).backgroundColor"


def test_the_pages_look_right(site, browser, tmp_path):
    """Each page renders with its stylesheet and script under the CSP (no console CSP violations)."""
    server, _ = site
    sign_in_with_keyboard(browser, server, "/")
    for path in ("/", "/metrics"):
        browser.get(f"{server.base}{path}")
        # review.css applied, once the page has loaded it (a loaded machine read the style before it had)
        WebDriverWait(browser, 10).until(lambda b: b.execute_script("return document.readyState") == "complete")
        WebDriverWait(browser, 10).until(lambda b: b.execute_script(HEADER_COLOUR) != "rgba(0, 0, 0, 0)")
        assert browser.execute_script(HEADER_COLOUR) == "rgb(29, 43, 58)"
        errors = [e for e in browser.get_log("browser") if "Content Security Policy" in e.get("message", "")]
        assert errors == [], errors
    Path(tmp_path / "queue.png").write_bytes(browser.get_screenshot_as_png())
