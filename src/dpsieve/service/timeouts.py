"""Deadlines for receiving a request on the HTTP server (bounded time for half-open
connections).

uvicorn closes a kept-alive connection that stays idle after a response
(``timeout_keep_alive``), but a connection that sends nothing at all, or only part of its
request line and headers, was held open indefinitely (measured: still open after 30 s), and
so was one that sent complete headers and then a body slower than any real client (a few
bytes now and then: the body-size limit bounds its size, not its time). A few hundred such
sockets tie up the server. :func:`request_timeout_protocol` returns uvicorn's h11 protocol
with one more timer:

- armed when the server starts waiting for a request's headers (a new connection, or the
  first data of a next request on a kept-alive one), closing the connection if the headers
  are not complete within ``header_seconds``;
- re-armed when the headers are complete and a body follows, closing the connection if the
  body is not complete within ``body_seconds``;
- cancelled once the whole request has been received.

Closing the connection while the handler awaits the body makes uvicorn report a
disconnect to the application: the request is never parsed, so nothing is charged or
written (the handlers charge only after the whole body has been read and validated).
Deadlines, not idle timeouts: a client cannot keep a connection by trickling bytes.
"""

from __future__ import annotations

from typing import Any

__all__ = ["header_timeout_protocol", "request_timeout_protocol"]


def request_timeout_protocol(header_seconds: float, body_seconds: float) -> type[Any]:
    """uvicorn's ``H11Protocol`` with deadlines for a request's headers and for its body."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class RequestTimeoutH11(H11Protocol):
        _deadline_task: Any = None
        _phase: Any = None  # the h11 state the armed deadline is for (IDLE or SEND_BODY)

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
            """Keep the deadline of the phase the request is in (headers, body, or none)."""
            state = self.conn.their_state
            if state is h11.IDLE or state is h11.SEND_BODY:
                if self._phase is not state:
                    self._cancel()
                    seconds = header_seconds if state is h11.IDLE else body_seconds
                    self._phase = state
                    self._deadline_task = self.loop.call_later(seconds, self._expired)
            else:
                self._cancel()

        def _cancel(self) -> None:
            if self._deadline_task is not None:
                self._deadline_task.cancel()
            self._deadline_task = None
            self._phase = None

        def _expired(self) -> None:
            phase = self._phase
            self._deadline_task = None
            self._phase = None
            if self.conn.their_state is phase and not self.transport.is_closing():
                self.transport.close()

    return RequestTimeoutH11


def header_timeout_protocol(seconds: float) -> type[Any]:
    """The header deadline alone (the body gets the same number of seconds)."""
    return request_timeout_protocol(seconds, seconds)
