"""Issue 11, operator keys "CLI too": ``dpsieve keys list|add|revoke`` on the ledger of a
running service. A key added by the CLI is accepted by the service; a key revoked by the
CLI is refused by it at once (no restart); errors are one line naming the problem."""

from __future__ import annotations

import json
from pathlib import Path

from fastapi.testclient import TestClient
from service_harness import free_port
from typer.testing import CliRunner

from dpsieve.cli import app as cli
from dpsieve.ledger import SQLiteStore
from dpsieve.service import Settings, create_app

OWNER = "owner-" + "c" * 40


def _cli(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, list(args))
    return r.exit_code, r.stdout, r.stderr


def test_keys_cli_rotates_and_revokes_against_a_running_service(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    url = ["--database-url", f"sqlite:///{db}"]
    store = SQLiteStore(db)
    with TestClient(create_app(Settings(owner_key=OWNER), store=store),
                    raise_server_exceptions=False) as c:
        r = c.post("/v1/analysts", headers={"Authorization": f"Bearer {OWNER}"},
                   json={"name": "ana"})
        old, old_id = r.json()["api_key"], r.json()["key_id"]
        code, out, _ = _cli("keys", "list", "ana", *url)
        assert code == 0
        assert [json.loads(x)["key_id"] for x in out.splitlines()] == [old_id]
        assert old not in out  # identifiers only
        code, out, _ = _cli("keys", "add", "ana", *url)
        assert code == 0
        new = json.loads(out)["api_key"]
        assert c.get("/v1/me", headers={"X-API-Key": new}).status_code == 200
        code, out, _ = _cli("keys", "list", "ana", *url)
        assert len(out.splitlines()) == 2
        code, out, _ = _cli("keys", "revoke", "ana", old_id, *url)
        assert code == 0, out
        assert json.loads(out) == {"analyst": "ana", "revoked": old_id}
        assert c.get("/v1/me", headers={"X-API-Key": old}).status_code == 401  # at once
        assert c.get("/v1/me", headers={"X-API-Key": new}).status_code == 200
        events = [e.event for e in store.audit()]
        assert "key_revoked" in events
    # errors: one line each, naming the problem
    code, _, err = _cli("keys", "revoke", "ana", old_id, *url)
    assert code == 1
    assert err.strip() == f"Error: Analyst 'ana' has no key '{old_id}'."
    code, _, err = _cli("keys", "list", "bob", *url)
    assert code == 1
    assert "No analyst named 'bob'" in err
    code, _, err = _cli("keys", "revoke", "ana", "XYZ", *url)
    assert code == 2
    assert "16 lower-case hex digits" in err
    assert len(err.strip().splitlines()) == 1


def test_keys_cli_never_prints_the_database_password() -> None:
    secret = "hunter2-Secret"
    dead = f"postgresql://postgres:{secret}@127.0.0.1:{free_port()}/test"
    code, out, err = _cli("keys", "list", "ana", "--database-url", dead)
    assert code != 0
    assert secret not in out + err
    assert err.startswith("Error: ")
