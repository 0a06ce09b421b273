"""Where a ledger lives: the one parser of database locations, and their printable form.

A location is ``memory://``, an SQLite file (``sqlite:///relative.db``,
``sqlite:////abs/path.db`` or a bare path), or a PostgreSQL connection string in either of
libpq's forms: a URL (``postgresql://user:password@host:5432/db?sslmode=require``) or
keyword/value pairs (``host=db user=svc password='s3 cr/et' dbname=ledger``).

:func:`parse_location` reads all of them once and returns a :class:`Location` holding what
the driver gets (``target``), what may be printed (``display``: every password, in the
user-info, the query string or a keyword, replaced by ``***``) and the passwords
themselves (``secrets``), so a driver's message that quotes one is scrubbed too
(:meth:`Location.scrub`). A password need not be percent-encoded in a URL: everything
between ``scheme://user:`` and the last ``@`` is the password (a ``/``, a space, an ``@``
included), and it is encoded for the driver. A string with a libpq keyword (``host=``,
``password=``, ...) is a PostgreSQL string, parsed as one, never an SQLite file name:
a malformed one is refused, its password withheld from the error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote, unquote

from dpsieve._validation import Redacted, fail
from dpsieve.ledger.redact import redact

__all__ = ["LIBPQ_KEYWORDS", "Location", "parse_location"]

#: The connection keywords libpq knows (PostgreSQL 17); a bare string using one of them
#: is a keyword/value connection string.
LIBPQ_KEYWORDS = frozenset((
    "host", "hostaddr", "port", "dbname", "user", "password", "passfile", "require_auth",
    "channel_binding", "connect_timeout", "client_encoding", "options", "application_name",
    "fallback_application_name", "keepalives", "keepalives_idle", "keepalives_interval",
    "keepalives_count", "tcp_user_timeout", "replication", "gssencmode", "sslmode",
    "requiressl", "sslnegotiation", "sslcompression", "sslcert", "sslkey", "sslpassword",
    "sslcertmode", "sslrootcert", "sslcrl", "sslcrldir", "sslsni", "requirepeer",
    "ssl_min_protocol_version", "ssl_max_protocol_version", "krbsrvname", "gsslib",
    "gssdelegation", "service", "target_session_attrs", "load_balance_hosts"))
_SECRET_KEYS = frozenset(("password", "sslpassword"))
_WHERE = "open_store"
_FORMS = ("memory://, sqlite:///<path> (or a file path), a postgresql:// URL, or libpq "
          "key=value pairs")
_KEYWORD_AT = re.compile(r"(?:^|\s)(?P<k>[A-Za-z_]+)\s*=")
_PG_SCHEMES = ("postgresql://", "postgres://")


@dataclass(frozen=True, slots=True)
class Location:
    """A parsed ledger location (see module docstring).

    ``kind`` is ``"memory"``, ``"sqlite"`` or ``"postgresql"``; ``target`` the SQLite path
    or the PostgreSQL connection string the driver gets; ``display`` the form to print;
    ``secrets`` the passwords, as given and as encoded, for :meth:`scrub`."""

    kind: str
    target: str
    display: str
    secrets: tuple[str, ...] = ()

    def scrub(self, text: str) -> str:
        """``text`` (a driver's message, a log line) with this location's passwords and
        every URL or keyword password withheld."""
        for s in sorted(self.secrets, key=len, reverse=True):
            if s:
                text = text.replace(s, "***")
        return redact(text)

    def __repr__(self) -> str:
        return f"Location({self.kind!r}, {self.display!r})"


def parse_location(text: str) -> Location:
    """The :class:`Location` ``text`` names; a ValidationError naming ``url`` (with the
    password withheld) if it names none."""
    if not isinstance(text, str) or not text.strip():
        raise fail("url", _WHERE, f"a non-empty database location: {_FORMS}",
                   text if not isinstance(text, str) else Redacted(redact(text)))
    if text == "memory://":
        return Location("memory", "", "memory://")
    low = text[:16].lower()
    if low.startswith(_PG_SCHEMES):
        return _pg_url(text)
    if low.startswith("sqlite:///"):
        return _sqlite(text[len("sqlite:///"):], text)
    if "://" in text.split("=", 1)[0]:
        raise fail("url", _WHERE, _FORMS, Redacted(_opaque(text)))
    m = _KEYWORD_AT.search(text)
    if m is not None and m.group("k").lower() in LIBPQ_KEYWORDS:
        return _pg_keywords(text)
    return _sqlite(text, text)


def _sqlite(path: str, text: str) -> Location:
    if not path or path == ":memory:" or path.startswith("file:"):
        raise fail("url", _WHERE, "an SQLite file path (use memory:// for a ledger in "
                   "memory)", Redacted(redact(text)))
    return Location("sqlite", path, f"sqlite:///{path}" if text == path else text)


def _pg_url(text: str) -> Location:
    """``scheme://[user[:password]@]host.../db?params``; the password is everything
    between the first ``:`` of the user-info and the last ``@``."""
    scheme, rest = text.split("://", 1)
    secrets: list[str] = []
    at = rest.rfind("@")
    userinfo, after = (rest[:at], rest[at + 1:]) if at >= 0 else (None, rest)
    head = f"{scheme}://"
    target = head
    if userinfo is not None:
        user, sep, pw = userinfo.partition(":")
        user_txt = quote(unquote(user), safe="")
        if sep:
            plain = unquote(pw)
            secrets += [pw, plain, quote(plain, safe="")]
            target += f"{user_txt}:{quote(plain, safe='')}@"
            head += f"{user_txt}:***@"
        else:
            target += f"{user_txt}@"
            head += f"{user_txt}@"
    base, qmark, query = after.partition("?")
    shown = base
    if qmark:
        pairs = parse_qsl(query, keep_blank_values=True)
        secrets += [v for k, v in pairs if k.lower() in _SECRET_KEYS]
        secrets += [m.group(1) for m in re.finditer(
            r"(?i)(?:^|&)(?:ssl)?password=([^&]*)", query)]
        shown += "?" + "&".join(
            f"{k}=***" if k.lower() in _SECRET_KEYS else f"{k}={v}" for k, v in pairs)
    target += after
    return Location("postgresql", target, head + shown, tuple(s for s in secrets if s))


def _pg_keywords(text: str) -> Location:
    """libpq ``key = value`` pairs: a value is a run of non-blank characters or a
    single-quoted string (``\\'`` and ``\\\\`` escaped); refused unless every pair parses
    and every key is a libpq keyword."""
    pairs: list[tuple[str, str]] = []
    pos, n = 0, len(text)
    pat_key = re.compile(r"\s*([A-Za-z_]+)\s*=\s*")
    while True:
        while pos < n and text[pos].isspace():
            pos += 1
        if pos >= n:
            break
        m = pat_key.match(text, pos)
        if m is None:
            raise fail("url", _WHERE, "libpq key=value pairs (a value with a space in "
                       "single quotes)", Redacted(_opaque(text)))
        key, pos = m.group(1).lower(), m.end()
        if key not in LIBPQ_KEYWORDS:
            raise fail("url", _WHERE, f"libpq key=value pairs with known keys ({key!r} is "
                       "not a libpq connection keyword)", Redacted(_opaque(text)))
        if pos < n and text[pos] == "'":
            value, pos = _quoted(text, pos)
        else:
            value, pos = _bare(text, pos)
        pairs.append((key, value))
    if not pairs:
        raise fail("url", _WHERE, _FORMS, Redacted(_opaque(text)))
    secrets = [v for k, v in pairs if k in _SECRET_KEYS]
    display = " ".join(f"{k}=***" if k in _SECRET_KEYS else f"{k}={_show(v)}"
                       for k, v in pairs)
    return Location("postgresql", text, display, tuple(s for s in secrets if s))


def _bare(text: str, pos: int) -> tuple[str, int]:
    out: list[str] = []
    i = pos
    while i < len(text) and not text[i].isspace():
        if text[i] == "\\" and i + 1 < len(text):
            i += 1
        out.append(text[i])
        i += 1
    return "".join(out), i


def _quoted(text: str, pos: int) -> tuple[str, int]:
    out: list[str] = []
    i = pos + 1
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            out.append(text[i + 1])
            i += 2
            continue
        if c == "'":
            return "".join(out), i + 1
        out.append(c)
        i += 1
    raise fail("url", _WHERE, "libpq key=value pairs with every quoted value closed",
               Redacted(_opaque(text)))


def _show(v: str) -> str:
    return v if v and not any(c.isspace() or c in "'\\" for c in v) else (
        "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'")


def _opaque(text: str) -> str:
    """A string that could not be parsed, for an error: a keyword string by its keys
    alone (a malformed one may hold a password anywhere: an unquoted space, a misspelt
    keyword), anything else with every URL and keyword password withheld."""
    keys = [m.group("k") for m in _KEYWORD_AT.finditer(text)]
    if keys and "://" not in text.split("=", 1)[0]:
        return f"a key=value string with the keys {', '.join(keys)} (values withheld)"
    return redact(text)
