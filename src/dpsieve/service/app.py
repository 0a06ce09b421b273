"""The HTTP service, built by :func:`create_app` (never at import time).

Data owners (the ``owner`` key) register data sets, set budgets, create analysts and grant
them data sets; analysts query the data sets they were granted and read their budgets.
Every query goes through :class:`dpsieve.session.Session`: the filter decides and the
ledger records the spend durably before the data is read. Errors are JSON 4xx
(:mod:`dpsieve.service.errors`). A data set the key may not see answers 404 exactly like
one that does not exist.
"""

# no "from __future__ import annotations": FastAPI must see the local Annotated aliases

import hmac
import math
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, HTTPException, Query, Request, Response
from fastapi import Path as PathParam
from fastapi.responses import HTMLResponse

from dpsieve._datasets import FileEngines
from dpsieve._session_query import engine_for
from dpsieve._session_release import ReleaseLimits
from dpsieve._validation import fail
from dpsieve.filters.base import BudgetLeft
from dpsieve.ledger.base import (
    BudgetNotFoundError,
    BudgetStore,
    Principal,
    has_budget,
    spend_key,
)
from dpsieve.ledger.factory import open_store
from dpsieve.service.auth import FailedAuthLimiter, hash_key, key_id, new_key
from dpsieve.service.budget_view import budget_text, budget_view, like_privacy, step_eps
from dpsieve.service.curves import ALPHAS, description_of, tradeoff_curve
from dpsieve.service.errors import BodyLimit, install_error_handlers, redact_quoted
from dpsieve.service.logs import RequestLog
from dpsieve.service.queries import install as install_queries
from dpsieve.service.queries import registered_schema, session_for, unit_change
from dpsieve.service.schemas import AnalystIn, BudgetIn, DatasetIn, GrantIn, QueryBody
from dpsieve.service.settings import Settings
from dpsieve.session import (
    data_column_kinds,
    data_columns,
    filter_for_budget,
    load_frame,
)

__all__ = ["PAGE_HEADERS", "QUERY_PATH", "create_app"]

#: The budget page is one self-contained file (inline style and script, data fetched from
#: this origin): nothing else may load, it may not be framed, types are not sniffed.
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
        "connect-src 'self'; img-src 'self' data:; form-action 'self'; base-uri 'none'; "
        "frame-ancestors 'none'"),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

#: A data-set name in a URL path: bounded, no control characters (a NUL byte reached
#: PostgreSQL, which refuses it with an error that became a 500; issue 11 defect 2).
DatasetName = Annotated[str, PathParam(min_length=1, max_length=256,
                                       pattern=r"^[^\x00-\x1f\x7f]+$")]


class _Frames:
    """Data frames loaded on first admitted use, reloaded when the file changes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[float, Any]] = {}

    def get(self, path: str) -> Any:
        mtime = Path(path).stat().st_mtime
        with self._lock:
            hit = self._cache.get(path)
            if hit is not None and hit[0] == mtime:
                return hit[1]
        frame = load_frame(path)
        with self._lock:
            self._cache[path] = (mtime, frame)
        return frame


def _after_spend(settings: Settings) -> Callable[[str], None] | None:
    if not settings.spend_marker and settings.pause_after_spend <= 0:
        return None

    def hook(key: str) -> None:  # test only: lets a test kill us between spend and answer
        if settings.spend_marker:
            Path(settings.spend_marker).write_text(key)
        time.sleep(settings.pause_after_spend)
    return hook


def _fastapi(**kw: Any) -> FastAPI:
    """FastAPI whose /docs and /redoc load their scripts from this server (the assets
    shipped in fastapi-offline), not a CDN: the docs work offline. Without the package
    (an old environment) the stock CDN pages are served."""
    try:
        from fastapi_offline import FastAPIOffline
    except ImportError:  # pragma: no cover - the service extra installs it
        return FastAPI(**kw)
    return FastAPIOffline(**kw)


def create_app(settings: Settings | None = None, *, store: BudgetStore | None = None) -> FastAPI:
    """A FastAPI app over ``store`` (default: the one ``settings.database_url`` names)."""
    settings = settings or Settings()
    st: BudgetStore = store or open_store(settings.database_url, schema=settings.schema)
    # The owner key lives in the settings only (compared by hash, never written to the
    # ledger), so a restart with another key revokes the old one.
    owner_hash = hash_key(settings.owner_key) if settings.owner_key else None
    frames = _Frames()
    engines = FileEngines()
    hook = _after_spend(settings)
    limiter = FailedAuthLimiter(settings.auth_failures_per_minute)
    limits = ReleaseLimits(settings.release_max_cost, settings.release_max_group_work)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        st.close()

    from dpsieve import __version__

    app = _fastapi(title="dpsieve", version=__version__, lifespan=lifespan,
                   description="Differentially private queries under an exact privacy filter.")
    app.state.store = st
    app.state.settings = settings
    install_error_handlers(app)
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    app.add_middleware(RequestLog)

    def principal(
        request: Request,
        authorization: Annotated[str | None, Header(max_length=512)] = None,
        x_api_key: Annotated[str | None, Header(max_length=512)] = None,
    ) -> Principal:
        addr = request.client.host if request.client else "unknown"
        wait = limiter.retry_after(addr)
        if wait is not None:  # refused before any key is looked up
            raise HTTPException(429, "Too many failed authentications from this address; "
                                     f"retry in {math.ceil(wait)} s.",
                                headers={"Retry-After": str(math.ceil(wait))})
        key = x_api_key
        if authorization and authorization.lower().startswith("bearer "):
            key = authorization[7:].strip()
        h = hash_key(key) if key else None
        # the owner's hash is compared in constant time; analysts' hashes are looked up
        # by an index in the ledger (no secret is compared byte by byte in Python)
        if h is not None and owner_hash is not None and hmac.compare_digest(h, owner_hash):
            request.state.principal_name = "owner"
            return Principal("owner", "owner")
        p = st.principal_for_key(h) if h else None
        request.state.key_hash = h
        if p is None or p.role == "owner":
            limiter.failed(addr)
            raise HTTPException(401, "A valid API key is required (header 'Authorization: "
                                     "Bearer <key>' or 'X-API-Key').")
        request.state.principal_name = p.name
        return p

    Who = Annotated[Principal, Depends(principal)]

    def owner(p: Who) -> Principal:
        if p.role != "owner":
            raise HTTPException(403, "Only the data owner may do this.")
        return p

    Owner = Annotated[Principal, Depends(owner)]

    def visible(p: Principal, name: str) -> dict[str, Any]:
        src = st.dataset(name)
        if src is None or (p.role != "owner" and name not in st.grants(p.name)):
            raise HTTPException(404, f"No data set named {name!r} is visible to this key.")
        return src

    def budget_of(name: str) -> dict[str, Any]:
        try:
            return st.load_filter(name).remaining().to_dict()  # JSON at the edge
        except BudgetNotFoundError:
            return {}

    def budget_filter(body: BudgetIn) -> tuple[Any, Any]:
        desc = body.budget()  # JSON to typed values, once (service.schemas)
        flt = filter_for_budget(desc, typical=body.typicals())
        try:  # a budget the filter cannot state (e.g. GDP mu = 1e308 overflows) is refused
            flt.remaining()
            flt.to_json()
        except (ArithmeticError, ValueError):
            raise fail("budget", "budget", "a budget whose remaining privacy can be stated "
                       "in floating point (its parameters are too large)",
                       body.description()) from None
        return desc, flt

    def set_budget(name: str, body: BudgetIn) -> dict[str, Any]:
        desc, flt = budget_filter(body)
        st.create_budget(name, flt, replace=True)
        src = st.dataset(name) or {}
        st.register_dataset(name, {**src, "neighbouring": desc.neighbouring.value,
                                   "budget": desc.to_dict()})
        return {"dataset": name, "budget": desc.to_dict(), "remaining": budget_of(name)}

    @app.get("/healthz", tags=["meta"])
    def healthz() -> dict[str, str]:
        """Liveness: the process answers (the ledger is not consulted)."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["meta"])
    def readyz() -> dict[str, str]:
        """Readiness: the ledger can commit a write (503 ledger_unavailable if not)."""
        check = getattr(st, "check_writable", None)
        if callable(check):
            check()
        return {"status": "ready"}

    @app.get("/v1/me", tags=["analysts"])
    def me(p: Who) -> dict[str, Any]:
        return {"name": p.name, "role": p.role,
                "datasets": st.datasets() if p.role == "owner" else st.grants(p.name)}

    @app.post("/v1/analysts", status_code=201, tags=["owners"])
    def create_analyst(body: AnalystIn, _: Owner) -> dict[str, Any]:
        if body.name == "owner":
            raise HTTPException(422, "'name' must not be 'owner' (reserved for the data owner).")
        key = new_key()
        st.add_principal(body.name, "analyst", hash_key(key))
        return {"name": body.name, "api_key": key, "key_id": key_id(hash_key(key))}

    def analyst_keys(name: str) -> list[dict[str, str]]:
        keys = st.principal_keys(name)  # type: ignore[attr-defined]
        if keys is None or name == "owner":
            raise HTTPException(404, f"No analyst named {name!r}.")
        return [{"key_id": key_id(h), "created_at": ts} for h, ts in keys]

    @app.get("/v1/analysts/{name}/keys", tags=["owners"])
    def list_keys(name: DatasetName, _: Owner) -> list[dict[str, str]]:
        """The analyst's keys (identifiers only; a key is shown once, when made)."""
        return analyst_keys(name)

    @app.post("/v1/analysts/{name}/keys", status_code=201, tags=["owners"])
    def add_key(name: DatasetName, _: Owner) -> dict[str, str]:
        """A new key for an existing analyst (rotation: add, hand over, then revoke)."""
        analyst_keys(name)
        key = new_key()
        st.add_principal(name, "analyst", hash_key(key))
        return {"name": name, "api_key": key, "key_id": key_id(hash_key(key))}

    @app.delete("/v1/analysts/{name}/keys/{kid}", status_code=204, tags=["owners"])
    def revoke_key(name: DatasetName, kid: Annotated[str, PathParam(
            pattern=r"^[0-9a-f]{16}$")], _: Owner) -> Response:
        """Revoke a key: once this returns, no request with it is admitted."""
        analyst_keys(name)
        if not st.revoke_key(name, kid):  # type: ignore[attr-defined]
            raise HTTPException(404, f"Analyst {name!r} has no key {kid!r}.")
        return Response(status_code=204)

    spark_lock = threading.Lock()
    spark_session: list[Any] = []

    def spark_engine(table: str) -> Any:
        """The Spark engine over a catalog table (the session opened once, on first use)."""
        from dpsieve.queries.engines.spark_connect import open_spark, spark_source

        if settings.spark_url is None:
            raise HTTPException(422, "'spark_table' needs a service started with a Spark URL "
                                     "(DPSIEVE_SPARK_URL); this one has none.")
        with spark_lock:
            if not spark_session:
                spark_session.append(open_spark(settings.spark_url))
        return spark_source(table, spark_session[0])

    def declared_schema(body: DatasetIn, actual: Callable[[], Any]) -> dict[str, Any]:
        """The public schema to store (checked, with the privacy unit, before any write;
        the unit may not change once the budget has paid for queries)."""
        declared = None if body.columns is None else [
            c.model_dump(exclude_none=True) for c in body.columns]
        schema = registered_schema(actual, declared, body.privacy_unit)
        unit_change(st, body.name, st.dataset(body.name) or {}, body.privacy_unit)
        return {"schema": schema, "privacy_unit": body.privacy_unit}

    @app.post("/v1/datasets", status_code=201, tags=["owners"])
    def register(body: DatasetIn, _: Owner) -> dict[str, Any]:
        """Register a file (or a Spark catalog table) with its public schema: column types
        from metadata, the owner's declared types, domains and bounds, and the privacy
        unit (``privacy_unit``: the column identifying a person; absent: one row each)."""
        if body.spark_table is not None:  # metadata only: the catalog's column types
            if body.budget is not None:
                budget_filter(body.budget)
            cols = spark_engine(body.spark_table).columns()
            schema_s = declared_schema(body, lambda: cols)
            old = st.dataset(body.name) or {}
            st.register_dataset(body.name, {
                **{k: v for k, v in old.items() if k != "path"},
                "spark_table": body.spark_table, "columns": [c.name for c in cols],
                "column_types": {c.name: c.type.value for c in cols}, **schema_s})
            out_s: dict[str, Any] = {"dataset": body.name, "spark_table": body.spark_table,
                                     **schema_s["schema"]}
            if body.budget is not None:
                out_s.update(set_budget(body.name, body.budget))
            return out_s
        assert body.path is not None  # the model requires exactly one source
        path = Path(body.path).expanduser().resolve()
        if path.suffix.lower() not in (".csv", ".parquet", ".pq") or not path.is_file():
            raise HTTPException(422, f"'path' must name an existing .csv or .parquet file on "
                                     f"the server. Got {body.path!r} instead.")
        if body.budget is not None:
            budget_filter(body.budget)  # validate before anything is written
        old = st.dataset(body.name) or {}
        try:
            columns = data_columns(path)
            kinds = data_column_kinds(path)  # public schema: names and kinds, no values
            table = engine_for(str(path)).columns()  # the types the engine reads (metadata)
        except Exception as e:  # an unreadable file is the owner's input error
            raise HTTPException(422, "'path' could not be read as a table: "
                                     f"{redact_quoted(str(e))}") from None
        schema = declared_schema(body, lambda: table)
        st.register_dataset(body.name, {**old, "path": str(path), "columns": columns,
                                        "column_types": kinds, **schema})
        out: dict[str, Any] = {"dataset": body.name, "path": str(path), **schema["schema"]}
        if body.budget is not None:
            out.update(set_budget(body.name, body.budget))
        return out

    @app.put("/v1/datasets/{name}/budget", tags=["owners"])
    def put_budget(name: DatasetName, body: BudgetIn, _: Owner) -> dict[str, Any]:
        if st.dataset(name) is None:
            raise HTTPException(404, f"No data set named {name!r}.")
        return set_budget(name, body)

    @app.post("/v1/datasets/{name}/grants", status_code=201, tags=["owners"])
    def grant(name: DatasetName, body: GrantIn, _: Owner) -> dict[str, Any]:
        st.grant(body.analyst, name)
        return {"dataset": name, "analyst": body.analyst}

    @app.get("/v1/datasets", tags=["analysts"])
    def list_datasets(p: Who) -> list[dict[str, Any]]:
        names = st.datasets() if p.role == "owner" else st.grants(p.name)
        return [{"dataset": n, "remaining": budget_of(n), "budget_left": budget_text(st, n)}
                for n in names]

    @app.get("/v1/datasets/{name}/budget", tags=["analysts"])
    def get_budget(
        name: DatasetName, p: Who,
        like: Annotated[str | None, Query(max_length=300, description=(
            'Count "about N more queries like this one" for this privacy, e.g. '
            '{"type": "pure", "eps": 0.1} (default: like the last admitted query).'))] = None,
    ) -> dict[str, Any]:
        src = visible(p, name)
        if not budget_of(name):
            return {"dataset": name, "budget": src.get("budget"), "remaining": {},
                    "admitted": 0, "history": [], "refusals": [], "summary": None,
                    "split": None}
        asked = None if like is None else like_privacy(
            like, src.get("neighbouring", "add_remove"))
        return {"dataset": name, "budget": src.get("budget"),
                **budget_view(st, name, p, like=asked)}

    @app.get("/v1/datasets/{name}/curves", tags=["analysts"])
    def curves(name: DatasetName, p: Who) -> dict[str, Any]:
        src = visible(p, name)
        if not budget_of(name):
            raise HTTPException(409, f"The data set {name!r} has no budget yet.")
        initial = st.initial_filter(name)
        lefts: list[tuple[dict[str, Any] | None, BudgetLeft]] = [
            (None, initial.remaining())]  # typed; the JSON is made per step below
        lefts += [(r.cost.to_dict(), r.remaining) for r in st.history(name)]
        kind = str(getattr(initial, "kind", ""))
        steps: list[dict[str, Any]] = []
        for i, (cost, left) in enumerate(lefts):
            desc = description_of(left)
            eps_left, delta = step_eps(kind, left)
            steps.append({"step": i, "cost": cost, "remaining": left.to_dict(),
                          "curve": None if desc is None else tradeoff_curve(desc),
                          "eps_left": eps_left, "delta": delta})
        return {"dataset": name, "budget": src.get("budget"),
                "alphas": [round(float(a), 6) for a in ALPHAS], "steps": steps}

    @app.post("/v1/datasets/{name}/queries", tags=["analysts"])
    def query(
        name: DatasetName, body: QueryBody, p: Who, request: Request,
        idempotency_key: Annotated[str | None, Header(min_length=1, max_length=200)] = None,
    ) -> dict[str, Any]:
        src = visible(p, name)
        if not has_budget(st, name):  # existence only: the spend reads the filter
            raise HTTPException(409, f"The data set {name!r} has no budget yet.")
        # plans and the one-aggregation shapes run inside the engine (DuckDB for a file,
        # Spark for a catalog table, whose rows never leave it); release and the robust
        # estimators load a file's frame after the spend
        if src.get("spark_table"):
            data, engine = spark_engine(str(src["spark_table"])), None
        else:  # the file's engine, kept open across queries (the file's stamp checked)
            data, engine = str(src["path"]), engines.get(str(src["path"]))
        session = session_for(src, data, st, name, p.name, hook, frames.get, limits,
                              engine=engine)
        key = f"{p.name}/{idempotency_key}" if idempotency_key else None
        # an analyst's spend commits only while the key is still valid (revocation races)
        token = spend_key.set(getattr(request.state, "key_hash", None)
                              if p.role != "owner" else None)
        try:
            typed = body.request(session.neighbouring)  # JSON to typed values, once
            return {"dataset": name, **session.execute(typed, key=key).to_dict()}
        finally:
            spend_key.reset(token)

    @app.get("/v1/datasets/{name}/audit", tags=["owners"])
    def audit(name: DatasetName, _: Owner) -> list[dict[str, Any]]:
        return [{"seq": e.seq, "ts": e.ts, "principal": e.principal, "event": e.event,
                 "key": e.key, "payload": e.payload} for e in st.audit(name)]

    def table_columns(src: dict[str, Any]) -> Any:  # metadata only, as at registration
        if not src.get("path"):
            return spark_engine(str(src["spark_table"])).columns()
        try:
            return engine_for(str(src["path"])).columns()
        except Exception as e:  # a file gone or unreadable since its registration
            raise HTTPException(422, "the data set's file could not be read as a table: "
                                     f"{redact_quoted(str(e))}") from None

    install_queries(app, principal, visible, owner, st, table_columns)

    @app.get("/ui", response_class=HTMLResponse, include_in_schema=False)
    def page() -> HTMLResponse:
        html = resources.files("dpsieve.service").joinpath("static/index.html").read_text()
        return HTMLResponse(html, headers=PAGE_HEADERS)

    _hot_first(app, QUERY_PATH)
    return app


#: The route almost every request takes.
QUERY_PATH = "/v1/datasets/{name}/queries"


def _hot_first(app: FastAPI, path: str) -> None:
    """Put the routes of ``path`` first. Starlette tries routes in order (a few
    microseconds each; the query route came 19th); no two routes match one request (tested:
    tests/system/test_system_service.py), so the order decides no request's outcome, only
    how many patterns are tried. The OpenAPI document lists this path first."""
    routes = app.router.routes
    hot = [r for r in routes if getattr(r, "path", None) == path]
    routes[:] = hot + [r for r in routes if all(r is not h for h in hot)]
