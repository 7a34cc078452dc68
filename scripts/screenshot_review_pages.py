"""Screenshots of the review web page's three pages (queue, entry, metrics) into docs/screenshots/.

Builds a small demo warehouse with a real run (two generated weeks) unless --warehouse names one, starts
`citegate serve` on 127.0.0.1, signs in and saves each page from Debian's headless Chromium (chromium-driver).

    .venv/bin/python scripts/screenshot_review_pages.py [--warehouse FILE] [--out docs/screenshots]
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]
WIDTH, HEIGHT = 1400, 1000


def demo_warehouse(root: Path) -> Path:
    sys.path.insert(0, str(ROOT))  # run as a file: the project's root holds benchmarks/
    from benchmarks.sample_run import generated_run

    return generated_run(root, days=14, requests_per_day=40, seed=5)  # two weeks: the chart draws lines


def richest_entry(warehouse: Path) -> str:
    """An entry with a judge answer and a better passage: the one that shows the most of the entry page."""
    import duckdb

    published = warehouse.with_name(warehouse.stem + ".published.duckdb")
    con = duckdb.connect(str(published), read_only=True)
    try:
        [(cid,)] = con.sql(
            "select citation_id from citation_queue order by better_chunk_id is null, judge_raw_answer is null, "
            "citation_id limit 1"
        ).fetchall()
    finally:
        con.close()
    return cid


def shot(driver, path: Path, height: int) -> None:
    driver.set_window_size(WIDTH, height)
    time.sleep(0.3)
    driver.save_screenshot(str(path))
    path.chmod(0o644)  # docs are for everyone (citegate's private umask made it 0600)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--warehouse", type=Path, default=None, help="a warehouse whose published copy exists")
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    a = p.parse_args(argv)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    os.environ["SE_OFFLINE"] = "true"  # never let Selenium Manager download anything
    chromedriver = shutil.which("chromedriver")
    if chromedriver is None:
        raise SystemExit("chromedriver not found: apt-get install chromium chromium-driver (scripts/ci/setup.d/)")
    work = Path(tempfile.mkdtemp(prefix="citegate-shots-"))
    warehouse = a.warehouse or demo_warehouse(work)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    reviews = work / "reviews"
    command = [sys.executable, "-m", "citegate_assets.cli", "serve", "--warehouse", str(warehouse)]
    command += ["--reviews", str(reviews), "--config", "<built-in>", "--port", str(port)]
    access = secrets.token_urlsafe(32)  # local mode's access token, given rather than read from the server's output
    server = subprocess.Popen(command, cwd=ROOT, env={**os.environ, "CITEGATE_REVIEW_TOKEN": access})
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={WIDTH},{HEIGHT}"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        driver.get(f"{base}/login?" + urlencode({"token": access}))
        driver.find_element(By.ID, "reviewer").send_keys("Ann Reviewer", Keys.ENTER)
        time.sleep(0.5)
        a.out.mkdir(parents=True, exist_ok=True)
        driver.get(f"{base}/?status=open")
        shot(driver, a.out / "review-queue.png", HEIGHT)
        driver.get(f"{base}/entry?" + urlencode({"id": richest_entry(warehouse)}))
        shot(driver, a.out / "review-entry.png", 1500)
        driver.get(f"{base}/metrics")
        time.sleep(1.0)  # the chart is drawn on the first request
        shot(driver, a.out / "review-metrics.png", 1900)
    finally:
        driver.quit()
        server.terminate()
        server.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)  # the demo warehouse and reviews log it made
    print(f"wrote {', '.join(p.name for p in sorted(a.out.glob('review-*.png')))} into {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
