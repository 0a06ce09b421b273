"""Credentials never leave: free text with database passwords withheld.

A PostgreSQL URL may carry a password (``postgresql://user:secret@host/db``) and libpq
messages may echo connection keywords (``password=secret``). Everything that prints a
driver's message or a location -- errors returned to clients, logs, CLI output -- goes
through :func:`redact` (a location's own passwords are also scrubbed by
:meth:`dpsieve.ledger.location.Location.scrub`, and it is printed by its ``display``).
"""

from __future__ import annotations

import re

__all__ = ["redact", "redact_url"]

#: ``scheme://user:password@`` -> ``scheme://user:***@``: the password runs to the last
#: ``@`` of the line, so one holding ``/``, a space or ``@`` is withheld whole (text after
#: it up to that ``@`` is withheld too: more, never less).
_URL_PASSWORD = re.compile(r"(?P<head>[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*):[^\n]*@")
#: ``password=secret`` (libpq keyword form, query strings) -> ``password=***``.
_KEYWORD = re.compile(r"(?i)\b(?P<k>password|passwd|pwd|sslpassword)(?P<eq>\s*=\s*)"
                      r"(?P<v>'(?:[^'\\]|\\.)*'?|[^\s&;]+)")


def redact_url(url: str) -> str:
    """A location printable: :meth:`~dpsieve.ledger.location.Location.display` when it
    parses, else ``url`` with every password pattern withheld."""
    from dpsieve.errors import DPError
    from dpsieve.ledger.location import parse_location

    try:
        return parse_location(url).display
    except DPError:
        return redact(url)


def redact(text: str) -> str:
    """``text`` with every URL password and ``password=...`` keyword withheld."""
    text = _URL_PASSWORD.sub(lambda m: m.group("head") + ":***@", text)
    return _KEYWORD.sub(lambda m: m.group("k") + m.group("eq") + "***", text)
