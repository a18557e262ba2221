"""Request-size limit and read deadlines, enforced while the request streams in.

Size: a limit that reads only Content-Length lets a chunked body (no Content-Length) through in full: a
200 MB chunked request once took the server from 96 to 647 MB before it was refused. ``BodySizeLimit``
counts the body as it arrives and answers 413 the moment the count passes the limit, with
``Connection: close`` so the server drops the connection instead of reading (and discarding) the rest.
Bodies under the limit are buffered (at most the limit) and handed to the app unchanged.

Time: a client that sends its request a byte at a time (slow loris) holds a connection, and uvicorn's
256-connection cap turns a few hundred such clients into a service that answers everyone else 503.
uvicorn bounds only the idle time between requests. Two deadlines close the rest: the body must arrive
within ``timeout_s`` of the app being called (else 408 and a closed connection, in ``BodySizeLimit``), and
the request head within ``timeout_s`` of the connection opening or of its first byte on a kept-alive
connection (else the connection is closed: ``head_deadline_protocol``, the HTTP protocol class ``serve``
gives uvicorn).

Head size: that protocol is uvicorn's h11 one, never its httptools one (which uvicorn picks by itself when
httptools is installed): httptools keeps whatever head it is sent (a 400 MB head grew the server by 405 MB
in under two seconds, and a single endless header line cannot be counted from its callbacks), while h11
refuses a head past ``MAX_HEAD_BYTES`` it has buffered with a 400 and a closed connection. The service's
requests are small JSON documents and polls; the parser's speed does not matter next to a compile."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class BodySizeLimit:
    """ASGI middleware: a request body over ``max_bytes`` (declared or counted) gets 413 and a closed
    connection; no more than ``max_bytes`` plus one received chunk is ever read from it. A body not complete
    within ``timeout_s`` gets 408 and a closed connection."""

    def __init__(self, app: ASGIApp, max_bytes: int, timeout_s: float = 30.0) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared == -1:
            await _answer(send, 400, "Content-Length is not a non-negative integer")
            return
        if declared is not None and declared > self.max_bytes:
            await _answer(send, 413, f"request larger than {self.max_bytes} bytes")
            return
        chunks: list[bytes] = []
        total = 0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        while True:
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
            except TimeoutError:
                await _answer(send, 408, f"request body not complete within {self.timeout_s:g} s")
                return
            if message["type"] == "http.disconnect":
                return  # the client left before its body was complete: nothing to answer
            body = message.get("body", b"")
            total += len(body)
            if total > self.max_bytes:
                await _answer(send, 413, f"request larger than {self.max_bytes} bytes")
                return
            chunks.append(body)
            if not message.get("more_body", False):
                break
        whole = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        handed = False

        async def replay() -> Message:
            nonlocal handed
            if not handed:
                handed = True
                return whole
            return await receive()  # later calls wait for the disconnect, as the server's would

        await self.app(scope, replay, send)


def _content_length(scope: Scope) -> int | None:
    """The declared body length, None when there is none, -1 when it is not a number."""
    for name, value in scope.get("headers", []):
        if name.lower() == b"content-length":
            try:
                n = int(value)
            except ValueError:
                return -1
            return n if n >= 0 else -1
    return None


async def _answer(send: Send, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})


# -- the request head ----------------------------------------------------------------------------------
#: the most of an incomplete request head h11 buffers (its own default) before refusing it
MAX_HEAD_BYTES = 16 * 1024


def head_deadline_protocol(timeout_s: float) -> type[asyncio.Protocol]:
    """uvicorn's h11 HTTP protocol (``uvicorn.run(http=..., h11_max_incomplete_event_size=MAX_HEAD_BYTES)``)
    that closes a connection whose request head is not complete within ``timeout_s``: counted from the
    connection opening, and on a kept-alive connection from the next request's first byte. Bodies are
    timed by ``BodySizeLimit``, idle keep-alive by uvicorn itself."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeadDeadlineH11(H11Protocol):
        head_timeout_s = timeout_s
        _head_timer: asyncio.TimerHandle | None = None

        def _arm(self) -> None:
            if self._head_timer is None:
                self._head_timer = asyncio.get_running_loop().call_later(self.head_timeout_s, self._expired)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _expired(self) -> None:
            self._head_timer = None
            if not self.transport.is_closing():
                self.transport.close()

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state is h11.IDLE:  # a head is (still) on its way
                self._arm()
            else:  # its head is complete: the request is in the app's hands
                self._disarm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return HeadDeadlineH11


__all__ = ["MAX_HEAD_BYTES", "BodySizeLimit", "head_deadline_protocol"]
