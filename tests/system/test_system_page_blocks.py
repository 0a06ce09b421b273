"""The budget page for a data set with blocks, in headless Chromium at desktop and phone
width: each block's and each quota's budget (the numbers drawn are the API's), the queue
with its position and reason, and the history naming the blocks each query was charged to;
an analyst sees their own quota and their own requests only."""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest
from cdp import Browser
from service_harness import Server, write_csv

OWNER = "dps_test-owner-key_Pb7RmZ2vK9pLw4sN8bYc3FhJ6t"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "chrome", "headless_shell")
WIDTHS = {"desktop": (1280, 900), "phone": (390, 844)}


#: Fill and send the owner's quota form once the view is drawn; ready when it reloaded.
SET_QUOTA = """(() => {
  const b = document.body.dataset;
  if (b.ready !== "blocks") return false;
  if (!b.sent) {
    b.sent = "1";
    document.getElementById("quota-name").value = "bob";
    document.getElementById("quota-budget").value = '{"type": "pure", "eps": 0.7}';
    document.getElementById("quota-form").requestSubmit();
    return false;
  }
  return document.querySelectorAll("#quotas tbody tr").length === 2;
})()"""


def _browser() -> str | None:
    return next((p for p in (shutil.which(n) for n in BROWSERS) if p), None)


def _count(eps: float, city: str | None = None) -> dict[str, Any]:
    where = [] if city is None else [{"column": "city", "op": "==", "value": city}]
    return {"type": "query", "privacy": {"type": "pure", "eps": eps},
            "aggregations": [{"type": "count"}], "where": where}


def _setup(srv: Server, csv: Path) -> dict[str, Any]:
    own = {"Authorization": f"Bearer {OWNER}"}
    r = httpx.post(srv.base + "/v1/datasets", headers=own, timeout=30, json={
        "name": "clinic", "path": str(csv), "infer_types": True,
        "blocks": {"column": "city", "budget": {"type": "pure", "eps": 1.0},
                   "unlock": {"type": "arrivals", "n": 2, "by": "analyst"}}})
    assert r.status_code == 201, r.text
    for city in ("a", "b", "c"):
        assert httpx.post(srv.base + "/v1/datasets/clinic/blocks", headers=own, timeout=30,
                          json={"block": city}).status_code == 201
    r = httpx.post(srv.base + "/v1/analysts", headers=own, json={"name": "ana"}, timeout=30)
    ana = {"X-API-Key": r.json()["api_key"]}
    httpx.post(srv.base + "/v1/datasets/clinic/grants", headers=own, timeout=30,
               json={"analyst": "ana"})
    assert httpx.put(srv.base + "/v1/datasets/clinic/quotas", headers=own, timeout=30, json={
        "scope": "analyst", "name": "ana", "budget": {"type": "pure", "eps": 2.0}}
    ).status_code == 200
    for q in (_count(0.2, "a"), _count(0.1)):  # ana unlocks half of each block
        r = httpx.post(srv.base + "/v1/datasets/clinic/queries", headers=ana, json=q,
                       timeout=60)
        assert r.status_code == 200, r.text
    r = httpx.post(srv.base + "/v1/analysts", headers=own, json={"name": "cy"}, timeout=30)
    cy = {"X-API-Key": r.json()["api_key"]}
    httpx.post(srv.base + "/v1/datasets/clinic/grants", headers=own, timeout=30,
               json={"analyst": "cy"})
    r = httpx.post(srv.base + "/v1/datasets/clinic/queries", headers=cy,  # another analyst's
                   json=_count(0.05, "c"), timeout=60)
    assert r.status_code == 200, r.text
    r = httpx.post(srv.base + "/v1/datasets/clinic/queue", headers={**ana, "Idempotency-Key":
                   "big"}, params={"wait": 3600}, json=_count(0.8, "b"), timeout=60)
    assert r.status_code == 202, r.text
    # the scheduler may change once blocks exist: DPack, re-ranked every 3 admissions
    r = httpx.put(srv.base + "/v1/datasets/clinic/blocks", headers=own, timeout=30, json={
        "column": "city", "budget": {"type": "pure", "eps": 1.0},
        "unlock": {"type": "arrivals", "n": 2, "by": "analyst"}, "scheduler": "dpack",
        "recompute": 3})
    assert r.status_code == 200, r.text
    view = httpx.get(srv.base + "/v1/datasets/clinic/blocks", headers=ana, timeout=30).json()
    return {"ana": ana["X-API-Key"], "view": view}


@pytest.mark.skipif(_browser() is None, reason="no headless Chromium on PATH (Debian: apt-get "
                    "install chromium); the view's JSON is tested in test_system_blocks_service")
def test_blocks_page_at_desktop_and_phone_width(tmp_path: Path) -> None:
    browser = _browser()
    assert browser is not None
    csv = write_csv(tmp_path / "clinic.csv")
    with Server(f"sqlite:///{tmp_path / 'l.db'}", OWNER) as srv, \
            Browser(browser, tmp_path / "profile") as chrome:
        api = _setup(srv, csv)
        url = f"{srv.base}/ui#dataset=clinic&key={api['ana']}"
        pages = {name: chrome.render(url, w, h, mobile=name == "phone",
                                     screenshot=tmp_path / f"blocks-{name}.png",
                                     ready="document.body.dataset.ready")
                 for name, (w, h) in WIDTHS.items()}
        # the owner sets a quota on the page: the form PUTs it, the view reloads with it
        owner_page = chrome.render(
            f"{srv.base}/ui#dataset=clinic&key={OWNER}", 1280, 900, mobile=False,
            screenshot=tmp_path / "blocks-owner.png", ready=SET_QUOTA)
        after = httpx.get(srv.base + "/v1/datasets/clinic/blocks", timeout=30,
                          headers={"Authorization": f"Bearer {OWNER}"}).json()
    assert 'data-ok="true"' in owner_page["dom"]
    assert "the quota of analyst 'bob'" in html.unescape(owner_page["dom"])
    assert [q["label"] for q in after["quotas"]] == [
        "the quota of analyst 'ana'", "the quota of analyst 'bob'"]
    assert re.search(r'id="quota-form"[^>]*hidden', pages["desktop"]["dom"])  # analysts: no
    v = api["view"]
    assert [b["used"] for b in v["blocks"]] == [pytest.approx(0.3), pytest.approx(0.1),
                                               pytest.approx(0.15)]
    # the view names each query's blocks; ana sees her queries and cy's cost, not cy's query
    assert [(h["key"] is not None, h["blocks"]) for h in v["history"]] == [
        (True, ["a"]), (True, ["a", "b", "c"]), (False, ["c"])]
    assert v["history"][2]["description"] == "a query by another analyst"
    for name, page in pages.items():
        dom = page["dom"]
        assert 'data-ready="blocks"' in dom, (name, dom[-2000:])
        # the declaration as the API states it: the scheduler with its re-ranking period
        assert (v["scheduler"], v["recompute"]) == ("dpack", 3)
        about = re.search(r'<p id="blocks-about" data-recompute="(\d+)">(.*?)</p>', dom, re.S)
        assert about is not None, dom[-2000:]
        assert int(about[1]) == v["recompute"]
        assert html.unescape(about[2]) == (
            f'{v["n_blocks"]} blocks by "city"; scheduler dpack (re-ranked every 3 '
            f'admissions); {v["unlock"]}.')
        rows = re.findall(r'<tr data-block="([^"]+)" data-used="([^"]+)">(.*?)</tr>', dom, re.S)
        assert [(html.unescape(b), float(u)) for b, u, _ in rows] == [
            (f'"{b["block"]}"', b["used"]) for b in v["blocks"]]
        assert "30 %" in rows[0][2]
        assert "eps 0.7 of 1 left" in rows[0][2]
        assert "the quota of analyst 'ana'" in html.unescape(dom)
        queue = re.findall(r'<tr data-status="waiting">(.*?)</tr>', dom, re.S)
        assert len(queue) == 1
        assert ">big<" in queue[0]
        assert "needs 80 %" in queue[0]
        assert "50 % of its budget unlocked" in queue[0]
        hist = re.findall(r'<tr data-blocks="([^"]+)">(.*?)</tr>', dom, re.S)
        assert [html.unescape(b) for b, _ in hist] == ['"a"', '"a","b","c"', '"c"']
        for (_, row), h in zip(hist, v["history"], strict=True):  # the API's, cell by cell
            cells = [html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
            assert cells[:4] == [h["key"] or "(another analyst's)", h["description"],
                                 ", ".join(f'"{b}"' for b in h["blocks"]), h["charged"]]
        assert "count of rows" in hist[0][1]
        assert "a query by another analyst" in hist[2][1]
        assert 'id="summary-card" hidden' in dom or 'hidden="" id="summary-card"' in dom \
            or re.search(r'id="summary-card"[^>]*hidden', dom)
    phone = pages["phone"]
    assert phone["scroll_width"] <= phone["inner_width"]
