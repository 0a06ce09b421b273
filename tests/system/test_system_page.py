"""The budget page in headless Chromium: one curve per budget state, shrinking query by query."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
from service_harness import Server, write_csv

OWNER = "dps_test-owner-key_Sv7RmZ2vK9pLw4sN8bYc3FhJ6t"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "chrome", "headless_shell")


def _browser() -> str | None:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.mark.skipif(_browser() is None, reason="no headless Chromium on PATH (Debian: apt-get "
                    "install chromium); the page's JSON endpoint is tested in test_system_service")
def test_page_draws_one_curve_per_budget_state(tmp_path: Path) -> None:
    browser = _browser()
    assert browser is not None
    csv = write_csv(tmp_path / "d.csv")
    with Server(f"sqlite:///{tmp_path / 'l.db'}", OWNER) as srv:
        own = {"Authorization": f"Bearer {OWNER}"}
        r = httpx.post(srv.base + "/v1/datasets", headers=own, json={
            "name": "d", "path": str(csv), "infer_types": True,
                "budget": {"type": "gdp", "mu": 1.0}}, timeout=60)
        assert r.status_code == 201, r.text
        q = {"type": "count", "privacy": {"type": "pure", "eps": 0.3}}
        for _ in range(3):
            assert httpx.post(srv.base + "/v1/datasets/d/queries", headers=own, json=q,
                              timeout=60).status_code == 200  # a loaded machine: not 5 s
        url = f"{srv.base}/ui#dataset=d&key={OWNER}"
        out = subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu",
             f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=10000",
             "--dump-dom", url],
            capture_output=True, text=True, timeout=90,
        )
    dom = out.stdout
    assert 'data-ready="4"' in dom, dom[-2000:] + out.stderr[-2000:]
    assert len(re.findall(r'class="curve"', dom)) == 4
    assert dom.count("<tr data-seq=") == 3  # one history row per admitted query
