"""Service settings: one frozen object, built explicitly or from ``DPSIEVE_*`` variables."""

from __future__ import annotations

import os
from dataclasses import dataclass

from dpsieve.queries.release_sizing import RELEASE_MAX_COST, RELEASE_MAX_GROUP_WORK

__all__ = ["Settings"]


@dataclass(frozen=True)
class Settings:
    """Everything :func:`dpsieve.service.create_app` needs.

    ``owner_key``: the data owner's API key (stored hashed at start-up); ``None`` means no
    owner can log in (analysts only). ``max_body_bytes``: larger request bodies get 413.
    ``pause_after_spend`` and ``spend_marker``: **test only** -- after the durable spend of
    a query, touch ``spend_marker`` (a file path) and sleep this many seconds before
    computing the answer, so a test can kill the process between spend and answer.
    ``spark_url``: a Spark master or Spark Connect URL (``DPSIEVE_SPARK_URL``); data sets
    may then be tables of its catalog (opened on first use, rows never leave Spark).
    ``release_max_cost`` (``DPSIEVE_RELEASE_MAX_COST``, work units, about 8 ns each) and
    ``release_max_group_work`` (``DPSIEVE_RELEASE_MAX_GROUP_WORK``, DP states x (queries +
    1)): resource limits of ``release`` queries, costed from public parameters (cells, n,
    workload, rounds) and refused with the estimate (422 ``instance_too_large``) before
    any spend. ``header_timeout`` (``DPSIEVE_HEADER_TIMEOUT``, s) and
    ``body_timeout`` (``DPSIEVE_BODY_TIMEOUT``, s): deadlines for receiving a request's
    headers and then its body, after which ``dpsieve serve`` closes the connection
    (:mod:`dpsieve.service.timeouts`; half-open and trickling connections).
    """

    database_url: str = "sqlite:///dpsieve.db"
    schema: str = "dpsieve"
    owner_key: str | None = None
    max_body_bytes: int = 1_000_000
    #: Failed authentications allowed per presented key hash and per connection address
    #: per minute (then 429; a valid key is always admitted).
    auth_failures_per_minute: int = 30
    #: Keys and addresses the failure table keeps (least recently seen dropped first).
    auth_table_size: int = 10_000
    #: How long a set of the ledger's key hashes is kept to refuse wrong keys without a
    #: lookup: a key made by another process may be refused this long (0: every key is
    #: looked up; :mod:`dpsieve.service.known_keys`).
    known_keys_seconds: float = 1.0
    #: Each analyst's request quota: a token bucket of this rate (per second; 0: none) ...
    analyst_requests_per_second: float = 100.0
    #: ... and this many requests at once (then 429 with Retry-After).
    analyst_request_burst: int = 200
    #: Refused queries allowed per analyst per ``refusal_window`` seconds (then 429
    #: before the ledger is touched; 0: no cap).
    refusals_per_window: int = 100
    refusal_window: float = 600.0
    #: Queued queries (a data set's queue) not admitted at once allowed per analyst per
    #: ``refusal_window`` (each stores its request until decided; then 429 before the
    #: ledger is touched; 0: no cap).
    queued_per_window: int = 100
    #: Proxies whose X-Forwarded-For / X-Forwarded-Proto ``dpsieve serve`` believes
    #: (addresses or networks); none by default: the socket's peer is the client.
    trusted_proxies: tuple[str, ...] = ()
    pause_after_spend: float = 0.0
    spend_marker: str | None = None
    spark_url: str | None = None
    release_max_cost: float = RELEASE_MAX_COST
    release_max_group_work: float = RELEASE_MAX_GROUP_WORK
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    #: Registration: at most this many columns (422 naming ``columns``) ...
    max_columns: int = 1000
    #: ... and its metadata read within this many seconds (422 naming ``path``).
    registration_timeout: float = 10.0

    @classmethod
    def from_env(cls, **overrides: object) -> Settings:
        """Settings from ``DPSIEVE_DATABASE_URL``, ``DPSIEVE_OWNER_KEY``, ... then overrides."""
        env = os.environ
        values: dict[str, object] = {
            "database_url": env.get("DPSIEVE_DATABASE_URL", "sqlite:///dpsieve.db"),
            "schema": env.get("DPSIEVE_SCHEMA", "dpsieve"),
            "owner_key": env.get("DPSIEVE_OWNER_KEY") or None,
            "max_body_bytes": int(env.get("DPSIEVE_MAX_BODY_BYTES", "1000000")),
            "auth_failures_per_minute": int(env.get("DPSIEVE_AUTH_FAILURES_PER_MINUTE", "30")),
            "auth_table_size": int(env.get("DPSIEVE_AUTH_TABLE_SIZE", "10000")),
            "known_keys_seconds": float(env.get("DPSIEVE_KNOWN_KEYS_SECONDS", "1")),
            "analyst_requests_per_second": float(env.get(
                "DPSIEVE_ANALYST_REQUESTS_PER_SECOND", "100")),
            "analyst_request_burst": int(env.get("DPSIEVE_ANALYST_REQUEST_BURST", "200")),
            "refusals_per_window": int(env.get("DPSIEVE_REFUSALS_PER_WINDOW", "100")),
            "refusal_window": float(env.get("DPSIEVE_REFUSAL_WINDOW", "600")),
            "queued_per_window": int(env.get("DPSIEVE_QUEUED_PER_WINDOW", "100")),
            "trusted_proxies": tuple(x.strip() for x in env.get(
                "DPSIEVE_TRUSTED_PROXIES", "").split(",") if x.strip()),
            "pause_after_spend": float(env.get("DPSIEVE_TEST_PAUSE_AFTER_SPEND", "0")),
            "spend_marker": env.get("DPSIEVE_TEST_SPEND_MARKER") or None,
            "spark_url": env.get("DPSIEVE_SPARK_URL") or None,
            "release_max_cost": float(env.get("DPSIEVE_RELEASE_MAX_COST",
                                              str(RELEASE_MAX_COST))),
            "release_max_group_work": float(env.get("DPSIEVE_RELEASE_MAX_GROUP_WORK",
                                                    str(RELEASE_MAX_GROUP_WORK))),
            "header_timeout": float(env.get("DPSIEVE_HEADER_TIMEOUT", "10")),
            "body_timeout": float(env.get("DPSIEVE_BODY_TIMEOUT", "30")),
            "max_columns": int(env.get("DPSIEVE_MAX_COLUMNS", "1000")),
            "registration_timeout": float(env.get("DPSIEVE_REGISTRATION_TIMEOUT", "10")),
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)  # type: ignore[arg-type]
