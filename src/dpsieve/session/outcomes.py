"""What an analyst observes when a query cannot be answered, decided without the rows.

* :func:`total` -- an admitted query's computation made total: whatever it raises becomes
  the one stored failure outcome (:data:`FAILED`), whose message (:data:`FAILED_MESSAGE`)
  is the same for every failure and every data set; the exception goes to the data
  owner's log. The session stores it as the charge's outcome, so a retry with the same
  idempotency key returns it again (:class:`~dpsieve.errors.QueryFailedError`), never a
  fresh computation with fresh noise.
* :func:`reading` -- reads of a registered data set's source before the spend: any
  failure (the file gone, unreadable, its columns changed since registration) is one
  refusal naming the data set only, never its path, its current header or a value.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from dpsieve._validation import fail

__all__ = ["FAILED", "FAILED_MESSAGE", "reading", "total"]

log = logging.getLogger("dpsieve.session")

#: The key of a stored outcome that is a failure after the charge.
FAILED = "failed_after_charge"
#: The one message of every failure after a charge.
FAILED_MESSAGE = (
    "The query was admitted and charged, but its computation failed (the engine ran out "
    "of memory or time, or failed otherwise). The charge is kept and no answer was "
    "released; a retry with the same idempotency key returns this outcome. The data "
    "owner's log has the details.")


def total(compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The outcome of an admitted query's computation: its answer, or -- whatever it
    raised -- ``{FAILED: True}`` (the exception and its traceback go to the owner's log,
    ``dpsieve.session``, never to the analyst: its text may depend on the rows)."""
    try:
        return compute()
    except Exception:
        log.exception("a charged query failed")
        return {FAILED: True}


@contextmanager
def reading(dataset: str | None) -> Iterator[None]:
    """Reads of a registered data set's source before the spend (``dataset``: its name;
    ``None``: not a registered data set, errors pass as they are)."""
    if dataset is None:
        yield
        return
    try:
        yield
    except Exception:
        log.warning("the data set %r could not be read as registered", dataset,
                    exc_info=True)
        raise fail("dataset", "query", "a data set whose file can be read as it was "
                   "registered (its file is missing or unreadable, or its columns "
                   "changed since registration; nothing was charged, and the data "
                   "owner's log has the details)", dataset) from None
