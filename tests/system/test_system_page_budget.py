"""The budget page (issue 15, item 3) in headless Chromium, at 1280 px and at a phone width.

The page must show the budget in plain words (eps left, fraction used, "more like the last
one", the split and how it was chosen), the history with each query's description, the
refusals, a legend and axis labels inside the plots, without horizontal scrolling on a
phone. Screenshots at both widths are written to ``test-output/`` (or $DPSIEVE_TEST_OUTPUT)
and every number drawn is checked against the API's.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest
from cdp import Browser
from service_harness import Server, write_csv

OWNER = "dps_test-owner-key_Pg7RmZ2vK9pLw4sN8bYc3FhJ6t"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "chrome", "headless_shell")
ROOT = Path(__file__).resolve().parents[2]
OUT = Path(os.environ.get("DPSIEVE_TEST_OUTPUT", ROOT / "test-output"))
WIDTHS = {"desktop": (1280, 900), "phone": (390, 844)}


def _browser() -> str | None:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


def _attr(dom: str, element_id: str, name: str) -> str:
    m = re.search(rf'id="{element_id}"[^>]*?data-{name}="([^"]*)"', dom) or re.search(
        rf'data-{name}="([^"]*)"[^>]*?id="{element_id}"', dom)
    assert m, f"no data-{name} on #{element_id}"
    return html.unescape(m.group(1))


def _js4(x: float) -> str:
    """How the page formats a number: Number(x.toPrecision(4)).toString() (for 1e-3..1e6)."""
    return f"{float(f'{x:.4g}'):g}"


def _text(dom: str, element_id: str) -> str:
    m = re.search(rf'id="{element_id}"[^>]*>(.*?)</', dom, re.S)
    assert m, f"no #{element_id}"
    return html.unescape(m.group(1)).strip()


def _setup(srv: Server, csv: Path) -> dict[str, Any]:
    own = {"Authorization": f"Bearer {OWNER}"}
    r = httpx.post(srv.base + "/v1/datasets", headers=own, timeout=30, json={
        "name": "clinic", "path": str(csv), "infer_types": True,
        "budget": {"type": "approx", "eps": 2.0, "delta": 1e-6,
                   "typical": [{"type": "pure", "eps": 0.3}]}})
    assert r.status_code == 201, r.text
    queries = [
        {"type": "count", "privacy": {"type": "pure", "eps": 0.3}},
        {"type": "mean", "column": "age", "lower": 0, "upper": 100,
         "privacy": {"type": "pure", "eps": 0.3}},
        {"type": "histogram", "column": "city", "categories": ["a", "b", "c"],
         "privacy": {"type": "pure", "eps": 0.3}},
    ]
    for q in queries:
        r = httpx.post(srv.base + "/v1/datasets/clinic/queries", headers=own, json=q, timeout=60)
        assert r.status_code == 200, r.text
    r = httpx.post(srv.base + "/v1/datasets/clinic/queries", headers=own, timeout=60, json={
        "type": "count", "privacy": {"type": "pure", "eps": 1.9}})
    assert r.status_code == 409, r.text  # refused: shown on the page
    budget = httpx.get(srv.base + "/v1/datasets/clinic/budget", headers=own, timeout=60).json()
    curves = httpx.get(srv.base + "/v1/datasets/clinic/curves", headers=own, timeout=60).json()
    return {"budget": budget, "curves": curves}


@pytest.mark.skipif(_browser() is None, reason="no headless Chromium on PATH (Debian: apt-get "
                    "install chromium); the page's JSON is tested in test_system_budget_words")
def test_budget_page_plain_words_at_desktop_and_phone_width(tmp_path: Path) -> None:
    browser = _browser()
    assert browser is not None
    OUT.mkdir(parents=True, exist_ok=True)
    csv = write_csv(tmp_path / "clinic.csv")
    pages: dict[str, dict[str, Any]] = {}
    with Server(f"sqlite:///{tmp_path / 'l.db'}", OWNER) as srv, \
            Browser(browser, tmp_path / "profile") as chrome:
        api = _setup(srv, csv)
        url = f"{srv.base}/ui#dataset=clinic&key={OWNER}"
        for name, (w, h) in WIDTHS.items():
            shot = OUT / f"budget-page-{name}.png"
            shot.unlink(missing_ok=True)
            pages[name] = chrome.render(url, w, h, mobile=name == "phone", screenshot=shot,
                                        ready="document.body.dataset.ready")
            assert shot.exists()
            assert shot.stat().st_size > 10_000
    doms = {name: p["dom"] for name, p in pages.items()}
    b, c = api["budget"], api["curves"]
    s = b["summary"]
    for name, dom in doms.items():
        assert 'data-ready="4"' in dom, (name, dom[-3000:])
        # the summary drawn is the API's
        assert float(_attr(dom, "eps-left", "value")) == s["eps_left"]
        assert _text(dom, "eps-left") == f"eps {_js4(s['eps_left'])}"
        assert float(_attr(dom, "fraction", "value")) == s["fraction_used"]
        assert _text(dom, "fraction") == f"{round(100 * s['fraction_used'])} %"
        assert _attr(dom, "more", "value") == str(s["more"]["count"])
        assert _text(dom, "summary-text") == s["text"]
        assert _text(dom, "split-text") == b["split"]["text"]
        assert "declared typical queries (pure eps 0.3)" in b["split"]["text"]
        assert _text(dom, "n-refused") == "1"
        # the eps chart: one point per state, at the API's eps and drawn at its height
        pts = re.findall(r'<circle cx="([\d.]+)" cy="([\d.]+)"[^>]*class="eps-point" '
                         r'data-step="(\d+)" data-eps="([^"]+)"', dom)
        assert [float(p[3]) for p in pts] == [st["eps_left"] for st in c["steps"]]
        svg = re.search(r'<svg id="eps-plot"[^>]*>', dom)
        assert svg
        f = json.loads(html.unescape(re.search(r'data-frame="([^"]+)"', svg.group(0)).group(1)))
        top = float(re.search(r'data-top="([^"]+)"', svg.group(0)).group(1))
        assert top == pytest.approx(1.25 * max(st["eps_left"] for st in c["steps"]))
        n = len(c["steps"]) - 1
        for cx, cy, step, eps in pts:  # each point drawn where the API's number puts it
            assert abs(float(cy) - (f["B"] - (f["B"] - f["T"]) * float(eps) / top)) < 0.01
            assert abs(float(cx) - (f["L"] + (f["R"] - f["L"]) * int(step) / n)) < 0.01
        assert len(re.findall(r'class="curve"', dom)) == 4
        # history with descriptions, refusals, legend and axis labels inside the plots
        rows = re.findall(r'<tr data-seq="\d+">(.*?)</tr>', dom, re.S)
        assert len(rows) == 3
        descs = [h["description"] for h in b["history"]]
        assert descs == ["count of rows", "mean of 'age' in [0, 100]",
                         "histogram of 'city' over 3 categories"]
        for row, h in zip(rows, b["history"], strict=True):
            assert html.escape(h["description"], quote=True) in row or h["description"] in \
                html.unescape(row)
            assert _js4(h["eps_left"]) in row
        assert "pure eps 1.9" in dom  # the refusal, as asked
        assert dom.count('class="axis-label"') == 4
        assert "queries admitted</text>" in dom
        assert "type I error α</text>" in dom
        assert dom.count('class="legend"') >= 3
    # usable on a phone: the page is laid out at the phone's width, nothing wider
    phone = pages["phone"]
    assert phone["inner_width"] == WIDTHS["phone"][0]
    assert phone["scroll_width"] <= phone["inner_width"]
    assert pages["desktop"]["inner_width"] == WIDTHS["desktop"][0]
