"""A deadline for request headers on the HTTP server (issue 11: bounded time for half-open
connections).

uvicorn closes a kept-alive connection that stays idle after a response
(``timeout_keep_alive``), but a connection that sends nothing at all, or only part of
its request line and headers, was held open indefinitely (measured: still open after
30 s), so a few hundred such sockets tie up the server. :func:`header_timeout_protocol`
returns uvicorn's h11 protocol with one more timer: armed whenever the server waits for a
request's headers (a new connection, or data of a next request on a kept-alive one) and
closing the connection if they are not complete within ``seconds``. A request whose
headers are complete is not affected (its body and handler are bounded elsewhere: the
body size by ``max_body_bytes``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["header_timeout_protocol"]


def header_timeout_protocol(seconds: float) -> type[Any]:
    """uvicorn's ``H11Protocol`` closing connections whose headers take over ``seconds``."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeaderTimeoutH11(H11Protocol):
        _header_task: Any = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._watch()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._watch()

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel()
            super().connection_lost(exc)

        def _watch(self) -> None:
            """Armed while the headers of a request are awaited, cancelled once complete."""
            waiting = self.conn.their_state is h11.IDLE
            if waiting and self._header_task is None:
                self._header_task = self.loop.call_later(seconds, self._expired)
            elif not waiting:
                self._cancel()

        def _cancel(self) -> None:
            if self._header_task is not None:
                self._header_task.cancel()
                self._header_task = None

        def _expired(self) -> None:
            self._header_task = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.close()

    return HeaderTimeoutH11
