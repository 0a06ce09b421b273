"""The tamper-evident ledger on SQLite and PostgreSQL: each budget's audit log is a hash
chain and its state the replay of the log. Reset a budget, delete a spend, insert, edit
or reorder an audit row, forge a correctly hashed reset: each is detected by
``verify`` (and ``dpsieve budget verify``), by a new store at start-up and, where it
changes the state or the chain's end, by a running store before its next spend. A ledger
written by schema version 2 migrates: its rows stay, bound by a digest, and tampering
with them is detected too."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import PG_URL, pg_available, unique_schema
from dpsieve.accounting.events import GDP, ZCDP, ApproxDP, PureDP
from dpsieve.errors import LedgerError
from dpsieve.filters import PureDPFilter
from dpsieve.ledger.base import LedgerIntegrityError, canonical_json, utcnow
from dpsieve.ledger.chain import row_hash

Store = Any


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A factory of stores on one database (a new store: a new process at start-up), the
    location, and the statements that lift the append-only trigger (as the tables'
    owner or anyone who can write the SQLite file could)."""
    from dpsieve.ledger import PostgresStore, SQLiteStore

    made: list[Store] = []
    schema = unique_schema()
    if request.param == "postgres":
        reason = pg_available()
        if reason:
            pytest.skip(reason)

    def make() -> Store:
        s: Store = (SQLiteStore(tmp_path / "l.db") if request.param == "sqlite"
                    else PostgresStore(PG_URL, schema=schema))
        made.append(s)
        return s

    unlock = (["DROP TRIGGER IF EXISTS audit_no_update", "DROP TRIGGER IF EXISTS audit_no_delete"]
              if request.param == "sqlite"
              else ["ALTER TABLE audit DISABLE TRIGGER audit_no_change"])
    url = (f"sqlite:///{tmp_path / 'l.db'}" if request.param == "sqlite" else PG_URL)
    yield {"make": make, "unlock": unlock, "url": url, "schema": schema,
           "backend": request.param}
    for s in made:
        s.close()
    if request.param == "postgres":
        s = PostgresStore(PG_URL, schema=schema)
        s.drop_schema()
        s.close()


def _sql(store: Store, *statements: str | tuple[str, tuple[Any, ...]]) -> None:
    with store._tx(write=True) as cur:
        for st in statements:
            sql, params = (st, ()) if isinstance(st, str) else st
            cur.run(sql, params)


def _spend(store: Store, budget: str, n: int, eps: float = 0.1) -> None:
    for i in range(n):
        out = store.spend(budget, PureDP(eps), key=f"{budget}-{i}", principal="ana",
                          request={"type": "count", "i": i})
        if out.decision.admitted:
            store.record_answer(budget, f"{budget}-{i}", {"value": i, "noise": {}})


def _setup(store: Store) -> None:
    store.create_budget("a", PureDPFilter(1.0))
    store.create_budget("b", PureDPFilter(1.0))
    _spend(store, "a", 4)
    _spend(store, "b", 2)
    store.spend("a", PureDP(5.0), key="too-much", principal="ana")  # refused: logged


def _problems(store: Store) -> dict[str, list[str]]:
    return {c.budget_id: c.problems for c in store.verify()}


def _tampered(ledger: dict[str, Any], tamper: Callable[[Store], None], budget: str = "a",
              *, running_sees_it: bool = True) -> str:
    """Tamper with a set-up ledger; the verdicts of verify, of a new store and of the
    store that was running; the problem verify states."""
    running = ledger["make"]()
    _setup(running)
    assert all(not p for p in _problems(running).values())
    tamper(running)
    fresh = ledger["make"]()
    problems = _problems(fresh)
    assert problems[budget], problems
    assert all(not p for b, p in problems.items() if b != budget), problems
    with pytest.raises(LedgerIntegrityError, match=repr(budget)):
        fresh.spend(budget, PureDP(0.01), key="after", principal="ana")
    with pytest.raises(LedgerIntegrityError):
        fresh.load_filter(budget)
    other = "b" if budget == "a" else "a"
    assert fresh.spend(other, PureDP(0.01), key="after", principal="ana").decision.admitted
    if running_sees_it:  # before its next spend, without a restart
        with pytest.raises(LedgerIntegrityError, match=repr(budget)):
            running.spend(budget, PureDP(0.01), key="after-2", principal="ana")
    code = CliRunner().invoke(_cli(), ["budget", "verify", "--database-url", ledger["url"],
                                       "--schema", ledger["schema"]])
    assert code.exit_code == 1, code.output
    assert f"{budget!r}: ALTERED" in code.output
    return str(problems[budget][0])


def _cli() -> Any:
    from dpsieve.cli import app

    return app


def test_reset_budget_is_detected(ledger: dict[str, Any]) -> None:
    why = _tampered(ledger, lambda s: _sql(
        s, "UPDATE budgets SET state = initial, n_spends = 0 WHERE budget_id = 'a'"))
    assert "state" in why


def test_reset_state_only_is_detected(ledger: dict[str, Any]) -> None:
    why = _tampered(ledger, lambda s: _sql(
        s, "UPDATE budgets SET state = initial WHERE budget_id = 'a'"))
    assert "not the replay" in why


def test_deleted_spend_is_detected(ledger: dict[str, Any]) -> None:
    # the state is intact: a running store sees it at its next start-up or verify
    why = _tampered(ledger, lambda s: _sql(
        s, "DELETE FROM spends WHERE budget_id = 'a' AND key = 'a-1'"),
        running_sees_it=False)
    assert "spend rows deleted" in why


def test_inserted_audit_row_is_detected(ledger: dict[str, Any]) -> None:
    why = _tampered(ledger, lambda s: _sql(s, (
        "INSERT INTO audit (ts, budget_id, principal, event, key, payload)"
        " VALUES (?, 'a', 'mallory', 'budget_set', '', '{}')", (utcnow(),))))
    assert "no chain position" in why


def test_forged_reset_with_a_correct_hash_is_detected(ledger: dict[str, Any]) -> None:
    """Whoever knows the chain's rules appends a well-hashed budget_set that sets the
    budget anew and resets the stored state to match: the replay refuses a budget set
    after admitted spends."""
    def forge(s: Store) -> None:
        with s._tx(write=True) as cur:
            _, n, prev = cur.run("SELECT seq, chain_n, chain_hash FROM audit WHERE "
                                   "budget_id = 'a' ORDER BY seq DESC LIMIT 1").one()
            state = str(cur.run("SELECT initial FROM budgets WHERE budget_id = 'a'").one()[0])
            ts, payload, data = utcnow(), '{"filter":{"eps":1.0}}', canonical_json(
                {"state": state})
            h = row_hash(prev, n + 1, ts, "a", "", "budget_set", "", payload, data)
            cur.run("INSERT INTO audit (ts, budget_id, principal, event, key, payload,"
                    " chain_n, chain_prev, chain_hash, chain_data) VALUES"
                    " (?, 'a', '', 'budget_set', '', ?, ?, ?, ?, ?)",
                    (ts, payload, n + 1, prev, h, data))
            cur.run("UPDATE budgets SET state = initial, n_spends = 0 WHERE budget_id = 'a'")
    assert "after 4 admitted spends" in _tampered(ledger, forge)


def test_edited_audit_row_is_detected(ledger: dict[str, Any]) -> None:
    def edit(s: Store) -> None:
        _sql(s, *ledger["unlock"], "UPDATE audit SET payload = '{\"admitted\":false}' WHERE"
             " budget_id = 'a' AND event = 'decision' AND key = 'a-0'")
    assert "does not match its hash" in _tampered(ledger, edit, running_sees_it=False)


def test_reordered_audit_rows_are_detected(ledger: dict[str, Any]) -> None:
    """Two rows swap places (every column but seq exchanged)."""
    cols = ("ts", "principal", "event", "key", "payload", "chain_n", "chain_prev",
            "chain_hash", "chain_data")

    def swap(s: Store) -> None:
        with s._tx(write=True) as cur:
            for st in ledger["unlock"]:
                cur.run(st)
            rows = cur.run(f"SELECT seq, {', '.join(cols)} FROM audit WHERE budget_id = 'a'"
                           " AND event = 'decision' ORDER BY seq LIMIT 2").all()
            (s1, *v1), (s2, *v2) = rows
            sets = ", ".join(f"{c} = ?" for c in cols)
            cur.run(f"UPDATE audit SET {sets} WHERE seq = ?", (*v2, s1))
            cur.run(f"UPDATE audit SET {sets} WHERE seq = ?", (*v1, s2))
    assert "moved" in _tampered(ledger, swap, running_sees_it=False)


def test_deleted_audit_row_is_detected(ledger: dict[str, Any]) -> None:
    def delete(s: Store) -> None:
        _sql(s, *ledger["unlock"], "DELETE FROM audit WHERE budget_id = 'a' AND"
             " event = 'request' AND key = 'a-2'")
    assert "chain position" in _tampered(ledger, delete, running_sees_it=False)


def test_every_filter_kind_and_charge_replays(ledger: dict[str, Any]) -> None:
    """The replay re-decides each admitted charge with the filter: pure, GDP residue,
    mixed (eps, delta), zCDP budgets; description and PLD charges; refusals and replays."""
    from dpsieve.accounting.events import description_from_json
    from dpsieve.accounting.pld import PLD
    from dpsieve.filters import filter_from_json  # type: ignore[attr-defined]
    from dpsieve.session import filter_for_budget

    s = ledger["make"]()
    budgets = {"pure": {"type": "pure", "eps": 1.0}, "gdp": {"type": "gdp", "mu": 1.0},
               "mixed": {"type": "approx", "eps": 1.0, "delta": 1e-6},
               "zcdp": {"type": "zcdp", "rho": 0.5}}
    charges = {"pure": [PureDP(0.2)] * 6, "gdp": [GDP(0.3), PureDP(0.2), GDP(0.9)],
               "mixed": [PureDP(0.1), ApproxDP(0.2, 1e-7), PureDP(0.3)] * 3,
               "zcdp": [ZCDP(0.1), PureDP(0.3), ZCDP(0.3)]}
    for name, desc in budgets.items():
        s.create_budget(name, filter_for_budget(description_from_json(desc, name="budget")))
        for i, q in enumerate(charges[name]):
            s.spend(name, q, key=f"{name}-{i}")
        s.spend(name, charges[name][0], key=f"{name}-0")  # a replay
    assert s.spend("gdp", PLD.gaussian(6.0), key="pld").decision.admitted
    assert s.spend("pure", PLD.laplace(10.0), key="pld").decision.admitted
    fresh = ledger["make"]()
    checks = fresh.verify()
    assert [c.budget_id for c in checks if c.problems] == []
    for c in checks:
        assert c.checkpoint is not None
        assert c.checkpoint.state == fresh.load_filter(c.budget_id).to_json()
        assert filter_from_json(c.checkpoint.initial).to_json() == \
            fresh.initial_filter(c.budget_id).to_json()
    assert sum(c.admitted for c in checks) == sum(len(fresh.history(b)) for b in budgets)


def test_replace_is_refused_when_the_spend_count_was_reset(ledger: dict[str, Any]) -> None:
    """Resetting n_spends to 0 does not let the budget be replaced: the replace replays
    the log first."""
    s = ledger["make"]()
    _setup(s)
    _sql(s, "UPDATE budgets SET n_spends = 0 WHERE budget_id = 'a'")
    with pytest.raises(LedgerIntegrityError, match="admitted spends"):
        s.create_budget("a", PureDPFilter(100.0), replace=True)
    with pytest.raises(LedgerError):
        ledger["make"]().create_budget("a", PureDPFilter(100.0), replace=True)


def test_refusals_and_replays_are_bounded_records(ledger: dict[str, Any]) -> None:
    from dpsieve.ledger.base import REFUSAL_RECORD_CHARS, fingerprint

    s = ledger["make"]()
    s.create_budget("a", PureDPFilter(1.0))
    big = {"type": "count", "pad": "x" * 900_000}
    s.spend("a", PureDP(5.0), key="big", principal="ana", request=big)  # refused
    s.spend("a", PureDP(0.5), key="ok", principal="ana", request={"type": "count"})
    s.spend("a", PureDP(0.5), key="ok", principal="ana", request={"type": "count"})
    with s._tx(write=False) as cur:
        sizes = [len(str(r[0])) for r in cur.run(
            "SELECT payload FROM audit WHERE budget_id = 'a'").all()]
    assert max(sizes) < REFUSAL_RECORD_CHARS + 300
    (req,) = [e.payload for e in s.audit("a") if e.event == "request" and e.key == "big"]
    assert req["truncated"] is True
    assert req["request_sha256"] == fingerprint(big)
    assert req["request_bytes"] > 900_000
    assert len(req["excerpt"]) == REFUSAL_RECORD_CHARS
    assert not _problems(s)["a"]


# -- migration from schema version 2 ---------------------------------------------------
def _legacy_ledger(ledger: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """A ledger as schema version 2 wrote it: a pure budget, three admitted spends (two
    answered), one refusal, a replay and a key revocation, rows without chain columns."""
    from dpsieve.ledger import migrations, postgres

    with monkeypatch.context() as m:
        m.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:2])
        m.setattr(postgres, "LATEST", 2)
        s = ledger["make"]()
        flt = PureDPFilter(1.0)
        init = flt.to_json()
        now = utcnow()
        rows: list[tuple[str, str, str, str, Any]] = [
            ("L", "", "budget_set", "", {"filter": flt.remaining().to_dict()})]
        spends = []
        for i, eps in enumerate((0.2, 0.3, 0.9, 0.1)):
            d = flt.try_spend(PureDP(eps))
            rows.append(("L", "ana", "request", f"k{i}", {"request": {"i": i}}))
            rows.append(("L", "ana", "decision", f"k{i}", d.to_dict()))
            if d.admitted:
                spends.append((f"k{i}", len(rows), canonical_json(d.to_dict()),
                               canonical_json({"i": i})))
                if i < 2:
                    rows.append(("L", "ana", "answer", f"k{i}", {"released": True}))
        rows.append(("L", "ana", "replay", "k0", {"request": {"i": 0}}))
        rows.append(("", "root", "key_revoked", "", {"key_id": "0" * 16}))
        with s._tx(write=True) as cur:
            cur.run("INSERT INTO budgets VALUES ('L', ?, ?, ?, ?, ?)",
                    (flt.to_json(), init, len(spends), now, now))
            seqs = []
            for b, p, e, k, payload in rows:
                seqs.append(int(cur.run(
                    "INSERT INTO audit (ts, budget_id, principal, event, key, payload)"
                    " VALUES (?, ?, ?, ?, ?, ?) RETURNING seq",
                    (now, b, p, e, k, canonical_json(payload))).one()[0]))
            for k, pos, dec, req in spends:
                cur.run("INSERT INTO spends VALUES ('L', ?, ?, 'ana', 'fp', ?, ?, NULL, ?,"
                        " NULL)", (k, seqs[pos - 1], dec, req, now))
        s.close()


def test_a_version_2_ledger_migrates_and_verifies(ledger: dict[str, Any],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    _legacy_ledger(ledger, monkeypatch)
    s = ledger["make"]()  # migrates to the chain
    checks = {c.budget_id: c for c in s.verify()}
    assert checks["L"].ok, checks["L"].problems
    assert checks[""].ok
    assert checks["L"].admitted == 3
    starts = [e for e in s.audit("L") if e.event == "chain_start"]
    assert len(starts) == 1
    assert starts[0].payload == {"legacy_rows": 12}
    # the budget goes on: spends after the migration are chained and replayed
    assert s.spend("L", PureDP(0.25), key="new").decision.admitted
    assert not s.spend("L", PureDP(0.5), key="no").decision.admitted
    assert all(c.ok for c in ledger["make"]().verify())
    # an earlier row edited: the digest the chain starts from no longer matches
    _sql(s, *ledger["unlock"], "UPDATE audit SET payload = '{\"request\":{\"i\":7}}' WHERE"
         " budget_id = 'L' AND event = 'request' AND key = 'k1'")
    problems = _problems(ledger["make"]())
    assert "does not follow" in problems["L"][0]


def test_readiness_never_writes(ledger: dict[str, Any]) -> None:
    s = ledger["make"]()
    s.create_budget("a", PureDPFilter(1.0))
    with s._tx(write=False) as cur:
        before = [cur.run(f"SELECT count(*) FROM {t}").one()[0]
                  for t in ("audit", "ready", "budgets")]
    for _ in range(5):
        s.check_ready()
    with s._tx(write=False) as cur:
        after = [cur.run(f"SELECT count(*) FROM {t}").one()[0]
                 for t in ("audit", "ready", "budgets")]
    assert after == before


def test_verify_cli_prints_heads_and_json(ledger: dict[str, Any]) -> None:
    s = ledger["make"]()
    _setup(s)
    args = ["budget", "verify", "--database-url", ledger["url"], "--schema", ledger["schema"]]
    r = CliRunner().invoke(_cli(), [*args, "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["ok"] is True
    assert {b["budget"]: b["admitted"] for b in out["budgets"]} == {"a": 4, "b": 2}
    heads = {b["budget"]: b["head"] for b in out["budgets"]}
    with s._tx(write=False) as cur:
        last = cur.run("SELECT chain_hash FROM audit WHERE budget_id = 'a' ORDER BY seq DESC"
                       " LIMIT 1").one()[0]
    assert heads["a"] == last
    r = CliRunner().invoke(_cli(), [*args[:2], "nope", *args[2:]])
    assert r.exit_code != 0
