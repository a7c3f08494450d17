"""The API's outer layer, in front of FastAPI: authenticate, then bound the body, before any of
it is read.

FastAPI reads and parses a JSON body before a dependency can look at the token, so an
unauthenticated client could make the server buffer any amount (and malformed JSON without a
token got 422, telling it about the endpoint). ``Guard`` is plain ASGI: it answers 401 from the
headers alone, 413 from ``Content-Length``, and 413 again if a chunked body runs past the limit
as it reads it (at most ``max_body`` bytes are ever held). Every answer is one JSON line, ``{"error", "detail"}``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from gpuorch.api import auth

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

PUBLIC = frozenset({"/v1/health"})  # answered without a token
# The web dashboard (gpuorch/web) checks its own session cookie or bearer token on every page,
# since a browser cannot send a bearer header on navigation; its bodies are bounded here still.
OWN_AUTH_PREFIX = "/ui"
OWN_AUTH_MAX_BODY = 16 * 1024  # its only body is the login form


async def answer(send: Send, status: int, message: str) -> None:
    body = json.dumps({"error": message, "detail": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class Guard:
    def __init__(self, app: ASGIApp, token: str, max_body: int) -> None:
        self.app, self.token, self.max_body = app, token, max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        path = str(scope.get("path", ""))
        own_auth = path == OWN_AUTH_PREFIX or path.startswith(OWN_AUTH_PREFIX + "/")
        if path not in PUBLIC and not own_auth:
            why = auth.check(headers.get("authorization"), self.token)
            if why is not None:
                await answer(send, 401, why)
                return
        limit = min(self.max_body, OWN_AUTH_MAX_BODY) if own_auth else self.max_body
        too_large = f"request body over {limit} bytes (api.max_body_bytes); send less"
        length = headers.get("content-length")
        if length is not None and (not length.isascii() or not length.isdigit() or int(length) > limit):
            await answer(send, 413 if length.isdigit() else 400, too_large if length.isdigit()
                         else "Content-Length is not a number")
            return
        # Authenticated: read the body here, bounded, so a chunked one past the limit is a 413 too
        # (FastAPI would turn an error raised while it reads into a 400), then hand it on.
        chunks, seen, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunks.append(message.get("body", b""))
            seen += len(chunks[-1])
            if seen > limit:
                await answer(send, 413, too_large)
                return
            more = message.get("more_body", False)
        body, replayed = b"".join(chunks), False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()  # after the body: wait for the disconnect, as the server would
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)
