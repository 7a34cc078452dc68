"""The review page's Label tab: over real HTTP (`citegate serve` on 127.0.0.1) it refuses what it must and writes
nothing then; in a real headless Chromium a labeller labels 100 sampled pairs with the keyboard alone, never shown
the judge's verdict, the answer, the question or any other chunk; the next `citegate calibrate` and nightly run rest
on those labels (`own`), and every page then says so in one line."""

from __future__ import annotations

import gzip
import json
import math
import re
import shutil
from pathlib import Path
from urllib.parse import urlencode

import pytest
import requests
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from citegate_assets.lib.calibration.label_log import LOG_NAME
from citegate_assets.lib.calibration.own_labels import draw_sample
from citegate_assets.lib.ingest.normalize import normalize_text
from citegate_assets.lib.storage.warehouse import connect
from citegate_assets.pipeline import run_calibration, run_range

from .judge_server import Reply, ScriptedJudgeServer
from .test_own_labels import PLAN, PLANTS, XSS_CLAIM, build, rows, truth_labels
from .test_review_web_browser import REVIEWER, chromium, keys, sign_in_with_keyboard
from .test_review_web_http import Server, csrf_of, error_text, sign_in

JUDGE_MODEL = "judge-PLANT-model"  # named on no label page
ANSWER_OF = {"y": "Yes", "p": "partial", "n": "No."}


def claim_keys(landing: Path, truth: dict[str, str]) -> dict[str, str]:
    """normalized claim -> the truth's key, from the logs as written (what the judge server answers by)."""
    out: dict[str, str] = {}
    for path in sorted(landing.iterdir()):
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as fh:
            for line in fh:
                try:
                    record = json.loads(line)
                    for pos, citation in enumerate(record["citations"]):
                        key = truth.get(f"{record['request_id']}#{pos}", "y")
                        out.setdefault(normalize_text(citation["claim"]), key)
                except (ValueError, KeyError, TypeError):
                    continue  # the generator's malformed lines
    return out


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    """A warehouse judged by an LLM judge on 127.0.0.1 that answers as the generator's truth says (so a careful
    labeller's labels show it calibrated), under a model name no label page may show."""
    root = tmp_path_factory.mktemp("label-web")
    known: dict[str, str] = {}

    def answer(request: dict, index: int) -> Reply:
        if not known:
            known.update(claim_keys(root / "landing", truth_labels(root)))
        claim = request["messages"][0]["content"].split("CLAIM:\n", 1)[1].split("\n", 1)[0]
        return Reply(ANSWER_OF[known.get(claim, "y")])

    server = ScriptedJudgeServer(answer).start()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CITEGATE_JUDGE_BASE_URL", server.base_url)
        mp.setenv("CITEGATE_JUDGE_MODEL", JUDGE_MODEL)
        mp.setenv("CITEGATE_JUDGE_API_KEY", "sk-test")
        build(root)
        yield root, server
    server.stop()


@pytest.fixture
def site(judged, tmp_path):
    root, server = judged
    for path in root.iterdir():
        if path.name != "dagster_home":
            (shutil.copytree if path.is_dir() else shutil.copy2)(path, tmp_path / path.name)
    (tmp_path / "dagster_home").mkdir()
    shutil.copy(root / "dagster_home" / "dagster.yaml", tmp_path / "dagster_home" / "dagster.yaml")
    web = Server(tmp_path, config=str(tmp_path / "citegate.toml"))
    yield web, tmp_path, server.base_url
    web.stop()


def sample_of(root: Path):
    with connect(root / "w.published.duckdb", read_only=True) as con:
        return draw_sample(con, 1, 100)


def log_lines(root: Path) -> list[dict]:
    path = root / "w.labels" / LOG_NAME
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


# ---------------------------------------------------------------------------------------------------- over HTTP


def test_the_label_tab_refuses_what_it_must_and_writes_nothing_then(site):
    web, root, _ = site
    stranger = requests.get(f"{web.base}/label")
    first = sample_of(root).pairs[0]
    assert stranger.status_code == 401 and first.passage not in stranger.text  # no pair for a stranger
    session = sign_in(web, "Lee Label")
    page = session.get(f"{web.base}/label")
    token = csrf_of(page.text)
    form = {"action": "yes", "pair": first.pair_key, "seed": "1", "size": "100"}
    assert session.post(f"{web.base}/label", data=form).status_code == 403  # no CSRF token
    unknown = session.post(f"{web.base}/label", data={**form, "csrf": token, "pair": "0" * 64})
    assert unknown.status_code == 400
    assert error_text(unknown.text) == "not recorded: the form names no pair of this sample: nothing was written"
    maybe = session.post(f"{web.base}/label", data={**form, "csrf": token, "action": "maybe"})
    assert maybe.status_code == 400
    assert error_text(maybe.text) == "not recorded: label 'maybe' is not one of yes, partial, no, skip, undo"
    nothing = session.post(f"{web.base}/label", data={"csrf": token, "action": "undo", "seed": "1", "size": "100"})
    assert nothing.status_code == 409 and 'id="label-problem">Nothing to undo.' in nothing.text
    bad_size = session.get(f"{web.base}/label", params={"size": "0"})
    assert (
        bad_size.status_code == 400
        and error_text(bad_size.text) == "size 0 is not between 1 and 10000 (pairs per surface)"
    )
    assert log_lines(root) == []
    done = session.post(f"{web.base}/label", data={**form, "csrf": token})
    assert done.status_code == 200 and done.url == f"{web.base}/label?seed=1&size=100"
    [line] = log_lines(root)
    assert (line["label"], line["labeller"], line["pair_key"], line["claim"]) == (
        "yes",
        "Lee Label",
        first.pair_key,
        first.claim,
    )
    # a second labeller is shown the same first pair and says no: the page shows the two labellers' agreement
    other = sign_in(web, "Max Other")
    page = other.get(f"{web.base}/label")
    assert f'name="pair" value="{first.pair_key}"' in page.text
    other.post(f"{web.base}/label", data={**form, "csrf": csrf_of(page.text), "action": "no"})
    table = session.get(f"{web.base}/label").text.split('id="label-agreement"', 1)[1].split("</table>", 1)[0]
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", table)
    assert cells == ["Lee Label · Max Other", "1", "0", "0.000"]  # kappa: p_o 0, p_e 0


def test_a_labels_path_that_is_a_file_is_refused_by_name(judged, tmp_path):
    root, _ = judged
    for name in ("w.published.duckdb", "w.lake", "w.text", "citegate.toml"):
        source = root / name
        (shutil.copytree if source.is_dir() else shutil.copy2)(source, tmp_path / name)
    (tmp_path / "labels.jsonl").write_text("")
    web = Server(tmp_path, env={"CITEGATE_LABELS": str(tmp_path / "labels.jsonl")})
    try:
        page = sign_in(web).get(f"{web.base}/label")
    finally:
        web.stop()
    assert page.status_code == 400
    assert error_text(page.text).startswith(f"{tmp_path / 'labels.jsonl'}: a file; own labels are appended to")
    assert (tmp_path / "labels.jsonl").read_text() == ""


# ---------------------------------------------------------------------------------------------------- in a browser


@pytest.fixture
def browser(monkeypatch):
    from .services import require_program

    monkeypatch.setenv("SE_OFFLINE", "true")
    driver = chromium(require_program("chromedriver", "chromium-driver"))
    yield driver
    driver.quit()


def next_page(driver) -> bool:
    return driver.execute_script("return document.readyState === 'complete' && window.__seen === undefined")


def chrome(driver, passage: str, claim: str) -> str:
    """The page's text around the pair, numbers blanked: the same for every pair, whatever its stratum."""
    text = driver.find_element(By.TAG_NAME, "body").text
    return re.sub(r"\d+", "#", text.replace(passage, "<passage>").replace(claim, "<claim>"))


def test_a_labeller_labels_100_pairs_blind_with_the_keyboard_and_the_next_runs_rest_on_them(site, browser, monkeypatch):
    web, root, judge_url = site
    sample = sample_of(root)
    truth = truth_labels(root)
    by_text = {(p.passage, p.claim): p for p in sample.pairs}
    citation_ids = {p.citation_id for p in sample.pairs} | {p.citation_id.split("#")[0] for p in sample.pairs}
    secrets = (*PLANTS, JUDGE_MODEL, "not_judged", "stratum", "verdict")
    sign_in_with_keyboard(browser, web, "/")
    browser.get(f"{web.base}/label")
    pressed: list[tuple[str, str]] = []
    chromes = set()
    for i in range(100):
        WebDriverWait(browser, 10).until(ec.presence_of_element_located((By.ID, "label-claim")))
        passage = browser.find_element(By.ID, "label-passage").text
        claim = browser.find_element(By.ID, "label-claim").text
        pair = by_text[(passage, claim)]  # exactly a pair of the sample: its passage as it reached the prompt
        source = browser.page_source
        assert not [s for s in secrets if s in source], i
        assert not [c for c in citation_ids if f"{c}#" in source or f">{c}<" in source or f'"{c}"' in source]
        chromes.add(chrome(browser, passage, claim))
        key = "s" if i == 10 else "u" if i == 20 else truth.get(pair.citation_id, "y")
        pressed.append((pair.pair_key, key))
        browser.execute_script("window.__seen = true")  # a new page has no such mark
        keys(browser, key)  # typed into the page: nothing is clicked
        WebDriverWait(browser, 10, ignored_exceptions=(WebDriverException,)).until(next_page)
    assert len(chromes) == 1, chromes  # no pair's page differs from another's but in the pair and the counts
    xss = next(p for p in sample.pairs if XSS_CLAIM.strip() in p.claim)
    labelled_keys = {k for k, _ in pressed}
    browser.get(f"{web.base}/label?" + urlencode({"pair": xss.pair_key}))  # the pair whose claim holds a script
    WebDriverWait(browser, 10).until(ec.presence_of_element_located((By.ID, "label-claim")))
    if xss.pair_key not in labelled_keys:  # still open: shown, as text
        assert browser.find_element(By.ID, "label-claim").text == xss.claim
    assert browser.execute_script("return window.__xss === undefined")
    assert browser.find_elements(By.CSS_SELECTOR, "main script, main img[onerror]") == []

    log = log_lines(root)
    undone = pressed[19][0]  # u takes back the last label, not the pair on the screen
    assert [(r["pair_key"], r["label"][0]) for r in log] == pressed[:20] + [(undone, "u")] + pressed[21:]
    assert {(r["labeller"], r["sample_seed"], r["sample_size"]) for r in log} == {(REVIEWER, 1, 100)}
    assert log[20]["label"] == "undo" and log[21]["pair_key"] == log[19]["pair_key"]  # the undone pair came back
    labelled = 100 - 1 - 2  # the skip is no label; the undo took one back
    done = browser.find_element(By.ID, "label-progress").text
    assert sum(int(n) for n in re.findall(r"(\d+) of \d+", done)) == labelled

    # the next calibration and the nightly run rest on these labels
    monkeypatch.setenv("DAGSTER_HOME", str(root / "dagster_home"))
    monkeypatch.setenv("CITEGATE_REVIEWS", str(root / "reviews"))
    monkeypatch.setenv("CITEGATE_JUDGE_BASE_URL", judge_url)
    monkeypatch.setenv("CITEGATE_JUDGE_MODEL", JUDGE_MODEL)
    assert run_calibration(warehouse=root / "w.duckdb", config_file=root / "citegate.toml").success
    db = root / "w.duckdb"
    assert rows(db, "select origin, labeller, count(*) from hand_labels group by all") == [("own", REVIEWER, labelled)]
    gates = rows(db, "select surface, status, labels from support_gate_status where stakes <> 'off' order by 1")
    assert gates and {labels for _, _, labels in gates} == {"own"}  # never reference: no other labels exist
    [(negatives, judged)] = rows(
        db,
        "select negatives, negatives + positives from judge_calibration where label_origin = 'own' "
        "and surface is null and scope = 'no_or_partial'",
    )
    # 100 pairs of this traffic hold fewer than 30 human no/partial: not enough to enforce; the status says how many
    # more pairs to label (the shortfall over the share of negatives so far)
    assert negatives < 30 and {status for _, status, _ in gates} == {"uncalibrated"}
    more = math.ceil((30 - negatives) / (negatives / judged))
    assert run_range(PLAN, landing=root / "landing", warehouse=db, config_file=root / "citegate.toml").success
    again = rows(db, "select surface, status, labels from support_gate_status where stakes <> 'off' order by 1")
    assert again == gates
    for path in ("/metrics", "/"):
        browser.get(f"{web.base}{path}")
        line = WebDriverWait(browser, 10).until(ec.presence_of_element_located((By.ID, "gate-line"))).text
        assert line.startswith(f"Support gate: judge {JUDGE_MODEL}; uncalibrated on own labels: billing-assistant")
        assert f"next: label about {more} more pairs (citegate label, or the review page's Label tab)." in line
        assert "reference" not in line
