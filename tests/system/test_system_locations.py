"""Ledger locations: one parser for URLs and libpq key=value strings, passwords withheld in
every form wherever a location is printed (``serve``, ``budget show``, ``keys list``), and
a libpq string never taken for an SQLite file name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from service_harness import free_port
from typer.testing import CliRunner

from conftest import PG_URL, pg_available, unique_schema
from dpsieve.errors import ValidationError
from dpsieve.ledger.base import LedgerUnavailableError
from dpsieve.ledger.location import parse_location
from dpsieve.ledger.redact import redact

#: passwords that broke the pattern-based redaction: '/', a space, '@', ':', '%', quotes
SECRETS = ["s3/cr3t", "s3 cr3t", "p@ss:w/rd x", "100%sure", "it's a \\ secret"]


def _forms(secret: str, port: int) -> list[str]:
    from urllib.parse import quote

    esc = secret.replace("\\", "\\\\").replace("'", "\\'")
    return [f"postgresql://bob:{secret}@127.0.0.1:{port}/test",
            f"postgres://bob:{quote(secret, safe='')}@127.0.0.1:{port}/test",
            f"host=127.0.0.1 port={port} user=bob password='{esc}' dbname=test"]


@pytest.mark.parametrize("secret", SECRETS)
def test_every_form_parses_and_displays_without_its_password(secret: str) -> None:
    psycopg = pytest.importorskip("psycopg")
    for text in _forms(secret, 5432):
        loc = parse_location(text)
        assert loc.kind == "postgresql"
        assert secret not in loc.display, loc.display
        assert "***" in loc.display
        assert "127.0.0.1" in loc.display
        assert "bob" in loc.display
        # the driver reads the password the owner meant (encoded for it where needed)
        assert psycopg.conninfo.conninfo_to_dict(loc.target)["password"] == secret
        assert secret not in loc.scrub(f"server said: {secret} / {text}")
        assert secret not in repr(loc)


def test_query_string_passwords_and_the_sqlite_forms() -> None:
    loc = parse_location("postgresql://db.example/x?sslmode=require&password=a%2Fb%20c")
    assert loc.display == "postgresql://db.example/x?sslmode=require&password=***"
    assert "a/b c" in loc.secrets
    for text, path in (("sqlite:///rel.db", "rel.db"), ("sqlite:////abs/l.db", "/abs/l.db"),
                       ("ledger.db", "ledger.db"), ("/data/host=a.db", "/data/host=a.db")):
        loc = parse_location(text)
        assert (loc.kind, loc.target) == ("sqlite", path)
    assert parse_location("memory://").kind == "memory"


@pytest.mark.parametrize("text", [
    "host=h password=pa ss dbname=x",        # an unquoted space: malformed, all withheld
    "host=h password='pa ss dbname=x",       # an unclosed quote
    "host=h pasword=pa-ss dbname=x",          # an unknown keyword (the value is withheld)
    "mysql://u:pa/ss word@h/db",             # an unknown scheme
])
def test_malformed_strings_are_refused_naming_url_without_the_password(text: str) -> None:
    with pytest.raises(ValidationError) as e:
        parse_location(text)
    assert e.value.parameter == "url"
    for part in ("pa ss", "pa/ss", "pa-ss", "ss word"):
        assert part not in str(e.value), str(e.value)


def test_a_libpq_string_is_never_an_sqlite_file(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The service ran on an empty SQLite ledger whose file name held the password."""
    from dpsieve.ledger import open_store

    monkeypatch.chdir(tmp_path)
    secret = "pw-" + "x" * 12
    dead = free_port()
    with pytest.raises(LedgerUnavailableError) as e:
        open_store(f"host=127.0.0.1 port={dead} user=bob password={secret} dbname=test "
                   "connect_timeout=1")
    assert secret not in str(e.value)
    assert list(tmp_path.iterdir()) == []  # no file was created


def test_free_text_redaction_takes_the_password_whole() -> None:
    assert redact("postgresql://u:pa ss/w@h/db") == "postgresql://u:***@h/db"
    assert redact("postgres://bob:p@ss:w@rd@h/db") == "postgres://bob:***@h/db"
    assert redact("x password='a b' y") == "x password=*** y"


@pytest.mark.parametrize("secret", SECRETS)
def test_cli_prints_no_password_in_any_form(secret: str, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """``serve`` (start-up line; uvicorn and the ledger stubbed), ``budget show``, ``budget
    verify`` and ``keys list`` on an unreachable PostgreSQL, in each form of location."""
    import uvicorn

    import dpsieve.ledger
    from dpsieve.cli import app
    from dpsieve.ledger import MemoryStore
    from dpsieve.service.auth import new_key

    pytest.importorskip("psycopg")
    forms = _forms(secret, free_port())
    for url in forms:
        for args in (["budget", "show"], ["budget", "verify"], ["keys", "list", "ana"]):
            r = CliRunner().invoke(app, [*args, "--database-url", url])
            assert r.exit_code != 0
            assert secret not in r.output, (args, r.output)
            assert secret not in str(r.exception)
    opened: list[str] = []

    def fake_open(url: str, **_: Any) -> Any:
        opened.append(url)
        return MemoryStore()

    monkeypatch.setattr(dpsieve.ledger, "open_store", fake_open)
    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: None)
    monkeypatch.setenv("DPSIEVE_OWNER_KEY", new_key())
    for url in forms:
        r = CliRunner().invoke(app, ["serve", "--database-url", url])
        assert r.exit_code == 0, r.output
        assert opened[-1] == url
        assert "serving on" in r.output
        assert "127.0.0.1" in r.output
        assert secret not in r.output, r.output


@pytest.mark.postgres
def test_keyword_form_opens_the_postgresql_ledger() -> None:
    reason = pg_available()
    if reason:
        pytest.skip(reason)
    from urllib.parse import urlsplit

    from dpsieve.ledger import PostgresStore, open_store

    u = urlsplit(PG_URL)
    text = (f"host={u.hostname} port={u.port or 5432} user={u.username or 'postgres'} "
            f"dbname={u.path.lstrip('/')} password='ignored by trust auth'")
    store = open_store(text, schema=unique_schema())
    try:
        assert isinstance(store, PostgresStore)
        assert "ignored by trust" not in repr(store)
        assert store.budget_ids() == []
    finally:
        store.drop_schema()  # type: ignore[attr-defined]
        store.close()
