"""``dpsieve blocks ... --url``: the same commands against a running service, through its
block routes (docs/service.md, "Data blocks, quotas and the queue"), as ``dpsieve query
--url`` does for queries. The key given (``--api-key`` or ``DPSIEVE_API_KEY``) acts: the
owner's key for ``declare``, ``add``, ``quota``, ``group`` and ``schedule``; any key
granted the data set for ``show``, ``queue`` and ``status`` (a queued request is the
key's analyst's, and ``status`` finds it by the key it was queued with). Every answer
of the service is printed as the local command prints it; a 4xx or 5xx is one line on
stderr naming the status and the service's message, exit code 2, as a local refusal.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import typer

__all__ = ["Remote", "check_key"]


def check_key(url: str | None, api_key: str | None) -> None:
    """``--url`` needs a key (as ``dpsieve query --url``)."""
    if url is not None and not api_key:
        raise typer.BadParameter("--url needs --api-key (or DPSIEVE_API_KEY).")


def _client(url: str, api_key: str) -> Any:
    """The HTTP client the commands use (a test passes requests to an in-process app)."""
    import httpx

    return httpx.Client(base_url=url.rstrip("/"), timeout=60,
                        headers={"Authorization": f"Bearer {api_key}"})


def _p(name: str) -> str:
    return quote(name, safe="")


class Remote:
    """One command's requests to the service at ``url`` with ``api_key``."""

    def __init__(self, url: str, api_key: str) -> None:
        self.url, self.api_key = url, api_key

    def call(self, method: str, path: str, *, json: Any = None,
             params: dict[str, Any] | None = None,
             headers: dict[str, str] | None = None) -> dict[str, Any]:
        """The service's JSON answer (2xx), or exit 2 with its status and message."""
        import httpx

        with _client(self.url, self.api_key) as c:
            try:
                r = c.request(method, path, json=json, params=params, headers=headers)
            except httpx.TransportError as e:  # no service there: one line, exit 2
                typer.echo(f"Error: the service at {self.url} could not be reached "
                           f"({type(e).__name__}).", err=True)
                raise typer.Exit(code=2) from None
        try:
            body = r.json()
        except ValueError:
            body = {"message": r.text[:300]}
        if not isinstance(body, dict):
            body = {"message": str(body)[:300]}
        if r.status_code >= 400:
            typer.echo(f"Error: the service answered {r.status_code} "
                       f"{body.get('error', '')}: {body.get('message', '')}".replace(
                           "  ", " "), err=True)
            raise typer.Exit(code=2)
        return body

    # -- the commands -------------------------------------------------------------------
    def declare(self, dataset: str, spec: dict[str, Any], path: str | None,
                privacy_unit: str | None, columns: Any) -> dict[str, Any]:
        """Register the data set with its blocks (``path``: a file on the server), or
        declare the blocks of a registered one (``PUT .../blocks``)."""
        if path is None:
            if privacy_unit is not None or columns is not None:
                raise typer.BadParameter("with --url, --privacy-unit and --columns register "
                                         "a data set: give --path too (a file on the "
                                         "server).")
            out = self.call("PUT", f"/v1/datasets/{_p(dataset)}/blocks", json=spec)
        else:
            body: dict[str, Any] = {"name": dataset, "path": path, "blocks": spec}
            if privacy_unit is not None:
                body["privacy_unit"] = privacy_unit
            if columns is not None:
                body["columns"] = columns
            out = self.call("POST", "/v1/datasets", json=body)
        return {"dataset": dataset, "blocks": out.get("blocks")}

    def add(self, dataset: str, values: list[str]) -> dict[str, Any]:
        """Each value arrives as a block (integers for an integer block column, as
        locally: the column's type from the public schema)."""
        name = _p(dataset)
        column = self.call("GET", f"/v1/datasets/{name}/blocks")["column"]
        cols = self.call("GET", f"/v1/datasets/{name}/schema").get("columns") or []
        integer = any(c.get("name") == column and c.get("type") == "integer" for c in cols)
        typed: list[Any] = []
        for v in values:
            try:
                typed.append(int(v) if integer else v)
            except ValueError:
                typer.echo(f"Error: block {v!r}: an integer is needed (the block column "
                           f"{column!r} is an integer column).", err=True)
                raise typer.Exit(code=2) from None
        added = [self.call("POST", f"/v1/datasets/{name}/blocks", json={"block": v})["block"]
                 for v in typed]
        return {"dataset": dataset, "added": added}

    def quota(self, dataset: str, scope: str, who: str, budget: Any) -> dict[str, Any]:
        out = self.call("PUT", f"/v1/datasets/{_p(dataset)}/quotas",
                        json={"scope": scope, "name": who, "budget": budget})
        return {"dataset": dataset, "scope": out["scope"], "name": out["name"],
                "budget": budget}

    def group(self, name: str, members: list[str]) -> dict[str, Any]:
        return self.call("PUT", f"/v1/groups/{_p(name)}", json={"members": members})

    def show(self, dataset: str) -> dict[str, Any]:
        return self.call("GET", f"/v1/datasets/{_p(dataset)}/blocks")

    def schedule(self, dataset: str) -> dict[str, Any]:
        return self.call("POST", f"/v1/datasets/{_p(dataset)}/schedule")

    def queue(self, dataset: str, query: Any, key: str, wait: float) -> dict[str, Any]:
        out = self.call("POST", f"/v1/datasets/{_p(dataset)}/queue", json=query,
                        params={"wait": wait}, headers={"Idempotency-Key": key})
        out.pop("dataset", None)
        return out

    def status(self, dataset: str, key: str) -> dict[str, Any]:
        out = self.call("GET", f"/v1/datasets/{_p(dataset)}/queue/{_p(key)}")
        out.pop("dataset", None)
        return out
