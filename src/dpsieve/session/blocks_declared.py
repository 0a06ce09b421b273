"""What a data set declares about its blocks, read from the ledger (public metadata):
whether it has blocks, its declaration (read once per request and passed on to
:func:`block_session_for`), and the check that a new declaration
changes nothing its blocks froze, made before anything is written; and the block session
one query of a registered data set runs in."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dpsieve.queries.schema import Schema
    from dpsieve.session.blocks import BlockSession

__all__ = ["block_session_for", "check_redeclaration", "declared_blocks", "has_blocks"]


def declared_blocks(store: Any, dataset: str) -> dict[str, Any] | None:
    """The block declaration ``dataset`` has in ``store`` (its JSON), or None: no blocks
    (or a store that keeps none). Read once per request: pass it on to
    :func:`block_session_for` (``declared``)."""
    spec = getattr(store, "block_spec", None)
    return None if spec is None else spec(dataset)


def check_redeclaration(store: Any, dataset: str, spec: dict[str, Any]) -> None:
    """Refuse, before anything is written, a declaration ``spec`` (its JSON) of
    ``dataset`` that changes what its blocks froze (the column, the budget,
    ``unit_in_one_block``: :func:`dpsieve.ledger.blockset.check_frozen`, a
    :class:`~dpsieve.errors.LedgerError`). The ledger checks again in the transaction
    that writes it; this read lets the service and the CLI refuse before registering."""
    from dpsieve.ledger.blockset import check_frozen

    old = declared_blocks(store, dataset)
    if old is not None and store.blocks(dataset):
        check_frozen(dataset, old, spec)


def has_blocks(store: Any, dataset: str) -> bool:
    """Whether ``dataset`` declares blocks in ``store`` (a budget per block)."""
    return declared_blocks(store, dataset) is not None


def block_session_for(src: dict[str, Any], data: Any, store: Any, name: str, principal: str,
                      after_spend: Callable[[str], None] | None = None, *,
                      engine: Any = None, release_limits: Any = None,
                      schema: Schema | None = None,
                      declared: Mapping[str, Any] | None = None) -> BlockSession:
    """The block session one query of a registered data set runs in (as
    :func:`dpsieve.session.datasets.session_for`): on ``data`` (a file's path, a Spark
    engine), its schema the stored one (``schema``: ``stored_schema(src)``, if known), its
    block declaration ``declared`` (:func:`declared_blocks`, if the caller read it)."""
    from dpsieve.session.blocks import BlockSession
    from dpsieve.session.datasets import stored_schema

    has_schema = isinstance(src.get("schema"), dict)
    return BlockSession(
        data, dataset=name, store=store, principal=principal, after_spend=after_spend,
        registered=True, columns=src.get("columns"),
        column_types=None if has_schema else src.get("column_types"), engine=engine,
        schema=(schema or stored_schema(src)) if has_schema else None,
        release_limits=release_limits, declared=declared)
