"""docs/architecture.md's checkable claims hold for the source tree.

* The layer diagram: every module of the package sits on one line of it, and every
  import -- at run time, inside a function, or only for type checking -- goes to a module
  on its own line or a line below (imports flow one way).
* No private imports across packages: a private module of a package (``pkg._x``) and a
  private name (``from pkg.mod import _x``) are imported only from inside that package.
* One engine resolver: ``engine_for`` is defined once, in ``queries/engines/resolve.py``,
  and no engine class is constructed outside ``queries/engines/``.
* The session and service stay thin: no module of ``session/`` over 350 lines, and
  ``service.app.create_app`` at most 60 lines (it only assembles the routers).
* One column-type system: ``queries.schema.ColumnType``; no other module lists the type
  names, and the service's declaration model names exactly its values.
* The import graph has no large cycle (the largest strongly connected component, type-only
  imports included, is a handful of modules inside one package).
* Directed rounding has one home: no ``nextafter`` outside ``dpsieve/_rounding.py``;
  conversions between descriptions one (``accounting.conversions``), and a description's
  JSON one mapping (``accounting.events.description_from_json``).
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "dpsieve"
ENGINES = ("DuckDBEngine", "PandasEngine", "PolarsEngine", "SparkEngine", "ReferenceEngine")


def _module(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def _modules() -> dict[str, Path]:
    return {_module(p): p for p in sorted(SRC.rglob("*.py"))}


def _unit(mod: str) -> str:
    """The diagram's unit of a module: its top-level package or module under dpsieve."""
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


@cache
def _layers() -> dict[str, int]:
    """unit -> height (0 = the bottom line of the diagram)."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = re.search(r"```text\n(.*?)```", text, re.S)
    assert block, "docs/architecture.md has no layer diagram"
    lines = [ln for ln in block.group(1).splitlines() if ln.strip()]
    rank: dict[str, int] = {}
    for height, line in enumerate(reversed(lines)):
        for name, end in re.findall(r"([A-Za-z_]+)(/|\.py)", line):
            exists = (SRC / name).is_dir() if end == "/" else (SRC / f"{name}.py").is_file()
            if exists and name != "dpsieve":
                assert name not in rank, f"{name} is on two lines of the diagram"
                rank[name] = height
    rank.setdefault("dpsieve", len(lines))  # the package's __init__ (its public API) on top
    rank.setdefault("__main__", len(lines))
    return rank


@cache
def _imports() -> list[tuple[str, str, list[str], int]]:
    """(importing module, imported module, names imported, line) for every dpsieve import."""
    mods = _modules()
    out = []
    for mod, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                    and node.module.split(".")[0] == "dpsieve":
                # ``from pkg import module`` imports the module; the package's version
                # string is metadata, not a layer
                names = [a.name for a in node.names if a.name != "__version__"]
                subs = [n for n in names if f"{node.module}.{n}" in mods]
                out += [(mod, f"{node.module}.{n}", [], node.lineno) for n in subs]
                rest = [n for n in names if n not in subs]
                if rest:
                    out.append((mod, node.module, rest, node.lineno))
            elif isinstance(node, ast.Import):
                out += [(mod, a.name, [], node.lineno) for a in node.names
                        if a.name.split(".")[0] == "dpsieve"]
    return out


def test_every_module_is_on_one_line_of_the_diagram() -> None:
    rank = _layers()
    missing = sorted({_unit(m) for m in _modules()} - set(rank))
    assert not missing, f"modules on no line of docs/architecture.md's diagram: {missing}"


def test_imports_flow_down_the_diagram() -> None:
    rank = _layers()
    up = [f"{src} (line {ln}) imports {dst}" for src, dst, _, ln in _imports()
          if rank[_unit(dst)] > rank[_unit(src)]]
    assert not up, "\n".join(up)


def _owner(mod: str) -> str | None:
    """The package a private module belongs to (``dpsieve.filters._x`` -> filters), or None
    for a public module and for the top-level private helpers every layer shares."""
    parts = mod.split(".")
    for i, p in enumerate(parts[1:], 1):
        if p.startswith("_") and not p.startswith("__"):
            return ".".join(parts[:i]) if i > 1 else None
    return None


def _inside(mod: str, package: str) -> bool:
    return mod == package or mod.startswith(package + ".")


def test_no_private_imports_across_packages() -> None:
    mods = _modules()
    bad = []
    for src, dst, names, ln in _imports():
        owner = _owner(dst)
        if owner is not None and not _inside(src, owner):
            bad.append(f"{src} (line {ln}) imports the private module {dst}")
        package = dst if (SRC.parent / dst.replace(".", "/")).is_dir() else \
            dst.rsplit(".", 1)[0]
        private = [n for n in names if n.startswith("_") and not n.startswith("__")
                   and f"{dst}.{n}" not in mods]
        if private and package != "dpsieve" and not _inside(src, package):
            bad.append(f"{src} (line {ln}) imports private names {private} of {dst}")
    assert not bad, "\n".join(bad)


def test_one_engine_resolver() -> None:
    defined = []
    constructed = []
    for mod, path in _modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name == "engine_for":
                defined.append(mod)
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ENGINES
                    and not mod.startswith("dpsieve.queries.engines")):
                constructed.append(f"{mod}: {node.func.id}(...)")
    assert defined == ["dpsieve.queries.engines.resolve"]
    assert not constructed, constructed


def test_the_session_and_service_stay_thin() -> None:
    sizes = {mod: len(path.read_text(encoding="utf-8").splitlines())
             for mod, path in _modules().items() if mod.startswith("dpsieve.session.")}
    assert sizes
    assert max(sizes.values()) <= 350, {m: n for m, n in sizes.items() if n > 350}
    tree = ast.parse(_modules()["dpsieve.service.app"].read_text(encoding="utf-8"))
    fn = next(n for n in ast.walk(tree)
              if isinstance(n, ast.FunctionDef) and n.name == "create_app")
    assert fn.end_lineno is not None
    assert fn.end_lineno - fn.lineno + 1 <= 60


_TYPE_NAMES = {"integer", "float", "boolean", "string"}


def test_one_column_type_system() -> None:
    """Column types are ``queries.schema.ColumnType``'s: no other module holds a list of
    the type names (a second type system, as ``_columns.py`` was: its kinds of a polars
    frame came from a pandas copy, where a null turned a boolean column into text), and
    the service's declaration model accepts exactly its values."""
    from typing import get_args

    from dpsieve.queries.schema import ColumnType
    from dpsieve.service.schemas import ColumnIn

    lists = []
    for mod, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            elts = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else []
            names = {e.value for e in elts if isinstance(e, ast.Constant)} & _TYPE_NAMES
            if len(names) >= 3:
                lists.append(f"{mod} (line {node.lineno})")
    assert lists == [f"dpsieve.service.schemas (line {_line_of_column_in()})"], lists
    assert set(get_args(ColumnIn.model_fields["type"].annotation)) == {
        t.value for t in ColumnType}


def _line_of_column_in() -> int:
    tree = ast.parse(_modules()["dpsieve.service.schemas"].read_text(encoding="utf-8"))
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "ColumnIn")
    return next(n.lineno for n in ast.walk(cls) if isinstance(n, ast.AnnAssign)
                and isinstance(n.target, ast.Name) and n.target.id == "type")


def _largest_cycle() -> list[str]:
    graph: dict[str, set[str]] = {m: set() for m in _modules()}
    for src, dst, _, _ in _imports():
        if dst in graph and dst != src:
            graph[src].add(dst)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    best: list[str] = []

    def visit(v: str) -> None:
        nonlocal best
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > len(best):
                best = comp
    for v in graph:
        if v not in index:
            visit(v)
    return sorted(best)


@pytest.mark.parametrize("limit", [4])
def test_no_large_import_cycle(limit: int) -> None:
    cycle = _largest_cycle()
    assert len(cycle) <= limit, cycle
    assert len({_unit(m) for m in cycle}) <= 1, cycle  # never across layers


def test_directed_rounding_has_one_home() -> None:
    """Every ulp step on a privacy parameter goes through dpsieve._rounding (next_up,
    next_down, toward_zero, round_up/down, sqrt_up/down, ... and their array forms)."""
    outside = []
    for mod, path in _modules().items():
        if mod == "dpsieve._rounding":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "nextafter":
                outside.append(f"{mod} (line {node.lineno})")
    assert not outside, outside


@pytest.mark.parametrize("name", ["pure_eps_of", "zcdp_of", "rdp_of", "rr_rdp_up",
                                  "smallest_gdp_mu_rr_up", "description_from_json"])
def test_conversions_and_the_json_mapping_of_descriptions_are_defined_once(name: str) -> None:
    """Conversions between privacy descriptions have one home (accounting.conversions, one
    dispatch table) and a description's JSON one mapping (accounting.events)."""
    homes = [mod for mod, path in _modules().items()
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, ast.FunctionDef) and node.name == name]
    assert homes in (["dpsieve.accounting.conversions"], ["dpsieve.accounting.events"]), homes
