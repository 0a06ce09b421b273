"""``dpsieve serve`` against hostile clients (issue 25): proxy headers are believed only
from proxies the owner names (a client could otherwise choose the address its failures
count under), the owner key never appears in the process list, and 128-bit random keys
(``openssl rand -hex 16``) are accepted as owner keys."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import httpx
import pytest
from service_harness import Server
from typer.testing import CliRunner

from dpsieve.cli import app
from dpsieve.service.auth import new_key, owner_key_problem


def _serve(monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[Any, dict[str, Any]]:
    import uvicorn

    import dpsieve.ledger
    from dpsieve.ledger import MemoryStore

    ran: list[dict[str, Any]] = []
    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: ran.append(k))
    monkeypatch.setattr(dpsieve.ledger, "open_store", lambda *a, **k: MemoryStore())
    r = CliRunner().invoke(app, ["serve", "--database-url", "memory://", *args])
    return r, (ran[0] if ran else {})


def test_proxy_headers_are_off_unless_proxies_are_trusted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DPSIEVE_OWNER_KEY", new_key())
    monkeypatch.delenv("DPSIEVE_TRUSTED_PROXIES", raising=False)
    r, kw = _serve(monkeypatch)
    assert r.exit_code == 0, r.output
    assert kw["proxy_headers"] is False
    r, kw = _serve(monkeypatch, "--trusted-proxy", "10.0.0.5", "--trusted-proxy",
                   "192.168.0.0/16")
    assert r.exit_code == 0, r.output
    assert kw["proxy_headers"] is True
    assert kw["forwarded_allow_ips"] == ["10.0.0.5", "192.168.0.0/16"]
    monkeypatch.setenv("DPSIEVE_TRUSTED_PROXIES", "10.1.1.1, 10.1.1.2")
    r, kw = _serve(monkeypatch)
    assert kw["forwarded_allow_ips"] == ["10.1.1.1", "10.1.1.2"]


def test_the_owner_key_is_never_taken_on_the_command_line(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    key = new_key()
    monkeypatch.delenv("DPSIEVE_OWNER_KEY", raising=False)
    r, kw = _serve(monkeypatch, "--owner-key", key)
    assert r.exit_code != 0
    assert not kw
    assert "process list" in r.output
    assert key not in r.output
    f = tmp_path / "owner.key"
    f.write_text(key + "\n")
    r, kw = _serve(monkeypatch, "--owner-key-file", str(f))
    assert r.exit_code == 0, r.output
    assert "generated" not in r.output  # the file's key is used, not printed
    assert key not in r.output
    r, _ = _serve(monkeypatch, "--owner-key-file", str(tmp_path / "missing"))
    assert r.exit_code != 0
    assert "cannot read" in r.output


def test_128_bit_random_keys_are_accepted_and_structure_is_refused() -> None:
    import base64

    for _ in range(2000):  # the forms people make keys with, at 128 bits
        for key in (secrets.token_hex(16), secrets.token_hex(16).upper(),
                    base64.b64encode(secrets.token_bytes(16)).decode(),
                    secrets.token_urlsafe(16), secrets.token_urlsafe(32)):
            assert owner_key_problem(key) is None, key
    for weak in ("0123456789abcdef" * 2, "deadbeef" * 4, "a" * 40, "passw0rd" * 5,
                 secrets.token_hex(15), "owner-secret-key"):
        assert owner_key_problem(weak) is not None, weak


def test_the_running_server_hides_its_key_and_ignores_forwarded_for(tmp_path: Path) -> None:
    """500 wrong keys with a rotating X-Forwarded-For from loopback got 0 x 429: the
    header chose the address. Now the peer is the address: the 31st wrong key is 429, the
    owner key is still admitted, and the key is not in the process's command line."""
    owner = secrets.token_hex(16)  # 128 bits, hex: accepted
    with Server(f"sqlite:///{tmp_path / 'l.db'}", owner) as srv:
        cmdline = Path(f"/proc/{srv.proc.pid}/cmdline").read_bytes().decode(errors="replace")
        assert owner not in cmdline
        with httpx.Client(base_url=srv.base, timeout=30) as c:
            codes = [c.get("/v1/me", headers={"X-API-Key": f"wrong-{i}",
                                              "X-Forwarded-For": f"203.0.113.{i % 250}"}
                           ).status_code for i in range(40)]
            assert codes[:30] == [401] * 30
            assert set(codes[30:]) == {429}
            me = c.get("/v1/me", headers={"Authorization": f"Bearer {owner}"})
            assert me.status_code == 200, me.text
