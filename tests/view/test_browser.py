"""The viewer in a real headless Chromium (Debian's ``chromium``, driven by Playwright); ``-m browser``.

They load a recorded eval run, filter the table, open a sample, and check that the plan graph and
the timeline are drawn with one node per plan node and one bar per node and call (the node ids are
read back from the drawn SVG), compare two systems, open the one-file export from disk and a
training run, with no script error on any page. Screenshots go to ``$MASORCH_VIEW_SHOTS`` (the
ones in ``docs/view/``) or the test's temporary directory. The browser is ``$MASORCH_CHROMIUM``, or
``chromium`` on the PATH; Playwright never downloads one.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from view_helpers import PLAN_NODES, make_training_run

from masorch.view.app import ViewApp
from masorch.view.export import export_html
from masorch.view.server import ViewServer
from masorch.view.source import detect

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright import sync_api
    except ImportError:  # the tier was asked for: a missing tool is a failure, not a skip
        pytest.fail("no playwright: pip install 'masorch[browser]'")
    executable = os.environ.get("MASORCH_CHROMIUM") or shutil.which("chromium")
    if executable is None:
        pytest.fail("no chromium: apt-get install chromium (or set MASORCH_CHROMIUM)")
    with sync_api.sync_playwright() as pw:
        instance = pw.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        yield instance
        instance.close()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    out = Path(os.environ.get("MASORCH_VIEW_SHOTS") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    return out


class Page:
    """A browser page that records script errors (every test asserts there were none)."""

    def __init__(self, browser: Any, url: str) -> None:
        self.errors: list[str] = []
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        self.page.on("console", lambda msg: msg.type == "error" and self.errors.append(msg.text))
        self.page.goto(url)

    def close(self) -> None:
        self.page.close()
        assert self.errors == []


def _serve(path: Path) -> tuple[ViewServer, threading.Thread]:
    server = ViewServer(ViewApp(detect(path)), port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, thread


@pytest.fixture
def served(eval_run: Path) -> Iterator[ViewServer]:
    server, _ = _serve(eval_run)
    yield server
    server.shutdown()
    server.server_close()


def _svg_texts(page: Any, selector: str) -> list[str]:
    return [t.strip() for t in page.locator(f"{selector} svg text").all_text_contents()]


def _check_sample(page: Any, prefix: str) -> None:
    """The graph has the plan's nodes and edges; the timeline a bar per node and per call, all drawn."""
    page.wait_for_selector(f"#{prefix}-graph[data-ready='1']")
    page.wait_for_selector(f"#{prefix}-timeline[data-ready='1']")
    graph = page.locator(f"#{prefix}-graph")
    assert graph.get_attribute("data-nodes") == str(len(PLAN_NODES))
    assert graph.get_attribute("data-edges") == "2"
    texts = _svg_texts(page, f"#{prefix}-graph")
    assert all(node in texts for node in PLAN_NODES), texts
    calls = page.locator(f"#{prefix}-calls details.call").count()
    assert calls == len(PLAN_NODES) + 1  # the orchestrator's call and one per node
    timeline = page.locator(f"#{prefix}-timeline")
    assert timeline.get_attribute("data-bars") == str(len(PLAN_NODES) + calls)
    assert timeline.get_attribute("data-drawn") == timeline.get_attribute("data-bars")
    lanes = _svg_texts(page, f"#{prefix}-timeline")
    assert all(lane in lanes for lane in ("orchestrator", *PLAN_NODES)), lanes


def test_an_eval_run_filters_and_opens_a_sample_with_its_graph_and_timeline(
    browser: Any, served: ViewServer, shots: Path
) -> None:
    view = Page(browser, served.url)
    page = view.page
    page.wait_for_selector("#sample-table tbody tr")
    assert page.locator("tr.sample-row").count() == 6
    page.wait_for_selector("#report table")
    assert page.locator("#report table").count() >= 2
    # Both systems are right on the same samples: the paired difference's interval has no width,
    # marked and explained as in report.md (the accuracies' intervals have a width and no mark)
    paired = page.locator("#report .card table", has_text="n paired").text_content() or ""
    assert "0.0 [0.0, 0.0] \u2020" in paired, paired
    accuracy = page.locator("#report .card table", has_text="accuracy").text_content() or ""
    assert "66.7 [0.0, 100.0]" in accuracy and "\u2020" not in accuracy, accuracy
    assert page.locator("#report .degenerate-note").count() >= 1
    page.screenshot(path=str(shots / "eval.png"), full_page=True)
    page.select_option("#filter-system", "mas:high")
    assert page.locator("tr.sample-row").count() == 3
    page.select_option("#filter-correct", "no")
    assert page.locator("tr.sample-row").count() == 1
    assert page.locator("#match-count").text_content() == "1 of 6 samples"
    page.locator("tr.sample-row").first.click()
    _check_sample(page, "s0")
    page.locator("#s0-calls details.call summary").nth(1).click()
    body = page.locator("#s0-calls details.call").nth(1)
    assert "Read the first number" in body.text_content()  # the sub-agent's messages are shown
    page.screenshot(path=str(shots / "sample.png"), full_page=True)
    page.click("#compare")
    page.wait_for_selector("#compare-view")
    page.wait_for_selector("#s1-timeline[data-ready='1']")
    _check_sample(page, "s0")
    assert page.locator("#s1-graph").get_attribute("data-nodes") == "1"  # the SAS baseline: one node
    page.screenshot(path=str(shots / "compare.png"), full_page=True)
    view.close()


def test_the_exported_file_works_from_disk_with_no_server(
    browser: Any, eval_run: Path, tmp_path: Path
) -> None:
    out = export_html(ViewApp(detect(eval_run)), tmp_path / "run.html")
    view = Page(browser, out.as_uri())
    page = view.page
    page.wait_for_selector("#sample-table tbody tr")
    assert page.locator("#reload").count() == 0  # nothing to reload from a file
    page.select_option("#filter-system", "mas:high")
    page.locator("tr.sample-row").first.click()
    _check_sample(page, "s0")
    view.close()


def test_a_training_run_draws_one_chart_per_series(browser: Any, tmp_path: Path, shots: Path) -> None:
    server, _ = _serve(make_training_run(tmp_path / "train", steps=6))
    try:
        view = Page(browser, server.url)
        page = view.page
        page.wait_for_selector("#training-charts canvas")
        series = page.locator("#training-charts [data-series]")
        assert series.count() == 5
        page.wait_for_function("document.querySelectorAll('#training-charts canvas').length === 5")
        page.wait_for_selector("#sampled-plans tbody tr")
        assert page.locator("#sampled-plans tbody tr").count() == 2  # the last step's two plans
        page.select_option("#sample-step", "2")
        page.wait_for_function("document.querySelectorAll('#sampled-plans tbody tr').length === 2")
        page.screenshot(path=str(shots / "training.png"), full_page=True)
        view.close()
    finally:
        server.shutdown()
        server.server_close()


def test_a_run_still_being_written_is_followed(browser: Any, eval_run: Path) -> None:
    log = eval_run / "log.jsonl"
    lines = log.read_text().splitlines(keepends=True)
    held = lines.pop()
    log.write_text("".join(lines) + held[:30])  # the last record is being written
    server, _ = _serve(eval_run)
    try:
        view = Page(browser, server.url)
        page = view.page
        page.wait_for_selector("#sample-table tbody tr")
        assert page.locator("tr.sample-row").count() == 5
        assert "(in progress)" in page.locator("#status").text_content()
        assert page.locator("#follow").is_checked()
        log.write_text("".join(lines) + held)  # the write completes
        page.wait_for_function("document.querySelectorAll('tr.sample-row').length === 6", timeout=15_000)
        assert page.locator("#status").text_content() == "6 of 6 samples"
        view.close()
    finally:
        server.shutdown()
        server.server_close()
