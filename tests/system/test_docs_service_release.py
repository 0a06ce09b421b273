"""docs/service.md's query-release example runs as written on the bundled data set.

The example is a JSON body (the service needs a server to post it to, so the docs test
does not run it): here it is read from the document and posted, on a replace-one budget,
to the service with ``release_toy.csv`` (10 rows) registered. It once said ``"n": 100``,
which that file cannot answer.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from fastapi.testclient import TestClient

from dpsieve.ledger import SQLiteStore
from dpsieve.service import Settings, create_app

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from test_docs_examples import blocks  # noqa: E402

OWNER = "dps_test-owner-key_Rl7RmZ2vK9pLw4sN8bYc3FhJ6t"


def test_the_release_example_of_docs_service_is_answered(tmp_path: Path) -> None:
    (body,) = [json.loads(code) for lang, code, _ in blocks(ROOT / "docs" / "service.md")
               if lang == "json" and '"release"' in code]
    data = ROOT / "src" / "dpsieve" / "data" / "release_toy.csv"
    assert body["n"] == len(data.read_text().strip().splitlines()) - 1  # its rows
    app = create_app(Settings(owner_key=OWNER), store=SQLiteStore(tmp_path / "l.db"))
    own = {"Authorization": f"Bearer {OWNER}"}
    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.post("/v1/datasets", headers=own, json={
            "name": "toy", "path": str(data), "infer_types": True,
            "budget": {"type": "pure", "eps": 2.0, "neighbouring": "replace_one"}})
        assert r.status_code == 201, r.text
        r = c.post("/v1/datasets/toy/queries", headers=own, json=body)
        assert r.status_code == 200, r.text
        value = r.json()["value"]
        assert len(value["answers"]) == len(value["queries"]) == 4
