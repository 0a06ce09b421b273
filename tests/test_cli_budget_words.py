"""``dpsieve filter run`` states budgets in plain words (issue 15, item 2).

Before: each step printed the filter's internal state as JSON (``left {"pure_eps": ...,
"pure_exact": "10808639105689191/18014398509481984", ...}``), a zCDP query against a GDP
budget was refused as "no residue: the query is not dominated by the GDP budget", and the
final line had no "about N more queries like this one".
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from dpsieve.cli import app

runner = CliRunner()


def _run(*args: str) -> list[str]:
    r = runner.invoke(app, ["filter", "run", *args])
    assert r.exit_code == 0, r.output
    return r.output.strip().splitlines()


def test_each_step_states_eps_left_and_fraction_used() -> None:
    lines = _run("--budget", "approx:eps=1,delta=1e-6", "--typical", "pure:eps=0.2",
                 *["pure:eps=0.2"] * 5)
    assert lines[0].startswith("Budget: an (eps, delta) budget")
    steps = lines[1:-1]
    assert [s.split()[1] for s in steps] == ["ADMIT"] * 4 + ["REFUSE"]
    for s in steps:
        assert "{" not in s  # no internal state
        assert re.search(r"eps [0-9.]+ of 1 left at delta 1e-06, \d+% used", s), s
    used = [int(re.search(r"(\d+)% used", s).group(1)) for s in steps[:4]]  # type: ignore[union-attr]
    assert used == [20, 40, 60, 80]
    assert "asks for pure eps 0.2, more than the budget has left" in steps[-1]
    assert "Nothing was spent" in steps[-1]
    last = lines[-1]
    assert "about 0 more queries like this one (pure eps 0.2); held as " in last
    # words first, parameters after: the split's mu only in the last clause, in brackets
    assert last.index("GDP mu") > last.index("held as") > last.index("% used")
    assert "Gaussian part:" not in last


def test_the_final_count_is_what_the_filter_then_admits() -> None:
    lines = _run("--budget", "approx:eps=1,delta=1e-6", "--typical", "pure:eps=0.2",
                 "pure:eps=0.2")
    n = int(re.search(r"about (\d+) more queries like this one", lines[-1]).group(1))  # type: ignore[union-attr]
    assert n == 3
    steps = _run("--budget", "approx:eps=1,delta=1e-6", "--typical", "pure:eps=0.2",
                 *["pure:eps=0.2"] * 6)[1:-1]
    assert sum(" ADMIT " in s for s in steps) == 1 + n


def test_a_given_query_is_counted_with_like() -> None:
    lines = _run("--budget", "gdp:mu=1", "gdp:mu=0.8", "--like", "gdp:mu=0.1")
    m = re.search(r"about (\d+) more queries like this one \(GDP mu 0.1\)", lines[-1])
    assert m is not None, lines[-1]
    n = int(m.group(1))
    assert 35 <= n <= 36  # 0.8^2 + n 0.1^2 <= 1 (36 only if the boundary were admitted)
    lines = _run("--budget", "gdp:mu=1", "gdp:mu=0.8", *["gdp:mu=0.1"] * 40)
    assert sum(" ADMIT " in s for s in lines) == 1 + n  # exactly what the filter admits


def test_a_query_type_that_never_fits_says_which_types_do() -> None:
    lines = _run("--budget", "gdp:mu=1", "zcdp:rho=0.1")
    step = lines[1]
    assert "not dominated" not in step
    assert "zCDP rho 0.1" in step
    assert "can never fit a Gaussian (GDP) budget" in step
    assert "query types that fit: pure (eps), GDP (mu)" in step


def test_gaussian_queries_are_named_in_plain_words() -> None:
    lines = _run("--budget", "approx:eps=1,delta=1e-6", "--typical", "pure:eps=0.2",
                 "gaussian:sigma=4")
    assert "Gaussian noise, GDP mu 0.25" in lines[1]
    assert "PLD" not in lines[1]


def test_json_lines_carry_words_and_the_final_summary() -> None:
    r = runner.invoke(app, ["filter", "run", "--json", "--budget", "gdp:mu=1", "zcdp:rho=0.1",
                            "gdp:mu=0.8"])
    assert r.exit_code == 0, r.output
    rows = [json.loads(x) for x in r.output.strip().splitlines()]
    assert "can never fit" in rows[0]["words"]
    assert rows[1]["admitted"]
    summary = rows[-1]["summary"]
    assert summary["like"] == "GDP mu 0.8"
    assert summary["more"] == {"count": 0, "at_least": False}
    assert 0 < summary["fraction_used"] < 1


def test_query_batch_prints_every_answer_paid_for(tmp_path: Path) -> None:
    """A zCDP query in a batch against an (eps, delta) budget used to raise
    IncompatiblePrivacyError out of ``dpsieve query --file``: the answer to the query before
    it was charged but never printed. Each query now gets its line: answer, refusal or
    error (incompatible_privacy names the types that fit), and the batch goes on."""
    db = f"sqlite:///{tmp_path / 'l.db'}"
    csv = tmp_path / "d.csv"
    csv.write_text("age\n" + "\n".join(str(20 + i % 50) for i in range(100)) + "\n")
    r = runner.invoke(app, ["budget", "set", "d", "--path", str(csv), "--infer-types",
        "--database-url", db,
                            "--budget", '{"type": "approx", "eps": 1, "delta": 1e-6}'])
    assert r.exit_code == 0, r.output
    pure = '{"type": "count", "privacy": {"type": "pure", "eps": 0.1}}'
    specs = [pure, '{"type": "count", "privacy": {"type": "zcdp", "rho": 0.01}}',
             '{"type": "mean", "column": "age", "privacy": {"type": "pure", "eps": 0.1}}', pure]
    (tmp_path / "q.jsonl").write_text("\n".join(specs) + "\n")
    r = runner.invoke(app, ["query", "d", "--file", str(tmp_path / "q.jsonl"),
                            "--database-url", db])
    assert r.exit_code == 1, r.output
    out = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    assert len(out) == 4
    assert "value" in out[0]
    assert "value" in out[3]
    assert out[1]["error"] == "incompatible_privacy"
    # approx fits too: the split chosen at the first (pure) query keeps a delta part
    # (docs/proofs/mixed.md §6; it was ["pure"])
    assert out[1]["fits"] == ["pure", "approx"]
    assert "Nothing was spent" in out[1]["message"]
    assert "value" not in out[2]  # a mean without bounds is refused, uncharged
    assert "2 of 4 queries not answered" in r.stderr
    r = runner.invoke(app, ["budget", "show", "--database-url", db, "--json"])
    assert json.loads(r.output)["budgets"][0]["admitted"] == 2  # what was printed, was paid
