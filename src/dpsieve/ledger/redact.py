"""Credentials never leave: database URLs and connection errors with passwords withheld.

A PostgreSQL URL may carry a password (``postgresql://user:secret@host/db``) and libpq
messages may echo connection keywords (``password=secret``). Everything that prints a URL
or a driver's message -- errors returned to clients, logs, CLI output -- goes through
:func:`redact` first (issue 11 defect 1).
"""

from __future__ import annotations

import re

__all__ = ["redact", "redact_url"]

#: ``scheme://user:password@`` -> ``scheme://user:***@`` (any scheme, any characters but
#: ``/`` and spaces in the password, up to the last ``@`` of the authority).
_URL_PASSWORD = re.compile(r"(?P<head>[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*):[^\s/]*@")
#: ``password=secret`` (libpq keyword form, query strings) -> ``password=***``.
_KEYWORD = re.compile(r"(?i)\b(?P<k>password|passwd|pwd|sslpassword)(?P<eq>\s*=\s*)"
                      r"(?P<v>'(?:[^'\\]|\\.)*'|[^\s&;]+)")


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (user, host, port, database kept)."""
    return redact(url)


def redact(text: str) -> str:
    """``text`` with every URL password and ``password=...`` keyword withheld."""
    text = _URL_PASSWORD.sub(lambda m: m.group("head") + ":***@", text)
    return _KEYWORD.sub(lambda m: m.group("k") + m.group("eq") + "***", text)
