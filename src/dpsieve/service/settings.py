"""Service settings: one frozen object, built explicitly or from ``DPSIEVE_*`` variables."""

from __future__ import annotations

import os
from dataclasses import dataclass

from dpsieve._session_release import RELEASE_MAX_COST, RELEASE_MAX_GROUP_WORK

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
    any spend (issue 11 defect 6). ``header_timeout`` (``DPSIEVE_HEADER_TIMEOUT``, s) and
    ``body_timeout`` (``DPSIEVE_BODY_TIMEOUT``, s): deadlines for receiving a request's
    headers and then its body, after which ``dpsieve serve`` closes the connection
    (:mod:`dpsieve.service.timeouts`; half-open and trickling connections).
    """

    database_url: str = "sqlite:///dpsieve.db"
    schema: str = "dpsieve"
    owner_key: str | None = None
    max_body_bytes: int = 1_000_000
    #: Failed authentications allowed per client address per minute (then 429).
    auth_failures_per_minute: int = 30
    pause_after_spend: float = 0.0
    spend_marker: str | None = None
    spark_url: str | None = None
    release_max_cost: float = RELEASE_MAX_COST
    release_max_group_work: float = RELEASE_MAX_GROUP_WORK
    header_timeout: float = 10.0
    body_timeout: float = 30.0

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
            "pause_after_spend": float(env.get("DPSIEVE_TEST_PAUSE_AFTER_SPEND", "0")),
            "spend_marker": env.get("DPSIEVE_TEST_SPEND_MARKER") or None,
            "spark_url": env.get("DPSIEVE_SPARK_URL") or None,
            "release_max_cost": float(env.get("DPSIEVE_RELEASE_MAX_COST",
                                              str(RELEASE_MAX_COST))),
            "release_max_group_work": float(env.get("DPSIEVE_RELEASE_MAX_GROUP_WORK",
                                                    str(RELEASE_MAX_GROUP_WORK))),
            "header_timeout": float(env.get("DPSIEVE_HEADER_TIMEOUT", "10")),
            "body_timeout": float(env.get("DPSIEVE_BODY_TIMEOUT", "30")),
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)  # type: ignore[arg-type]
