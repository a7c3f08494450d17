"""Request bodies as standard JSON: ``NaN``, ``Infinity``, ``-Infinity`` and numbers past a
double's range (``1e400``) are refused with a 400 naming the field.

Python's ``json`` (which FastAPI uses) reads all four as floats, and a float NaN then passes
every comparison a range check makes: a NaN budget was stored as no cap (issue 31). RFC 8259
has no such numbers, so they are refused where the body is decoded, before any model sees it:
``StrictJsonRoute`` gives each endpoint a request whose ``json()`` is ``loads`` below.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException


class _NotANumber:
    """A placeholder for a non-standard number, found again (with its path) after decoding."""

    def __init__(self, text: str) -> None:
        self.text = text


def _float(text: str) -> float | _NotANumber:
    value = float(text)
    return value if math.isfinite(value) else _NotANumber(text)


def _first_bad(data: Any) -> tuple[str, str] | None:
    """The path (``spec.budget.max_cost``) and text of the first non-standard number in ``data``;
    iterative, so any depth ``json`` decoded is walked without recursion."""
    stack: list[tuple[tuple[str, ...], Any]] = [((), data)]
    while stack:
        path, v = stack.pop()
        if isinstance(v, _NotANumber):
            return ".".join(path) or "(body)", v.text
        if isinstance(v, dict):
            stack.extend((path + (str(k),), x) for k, x in reversed(v.items()))
        elif isinstance(v, list):
            stack.extend((path + (str(i),), x) for i, x in reversed(list(enumerate(v))))
    return None


def loads(body: bytes | str) -> Any:
    """``body`` decoded as standard JSON; HTTPException(400) naming the field of a NaN, an
    infinity or an out-of-range number. Malformed JSON raises ``json.JSONDecodeError`` as before."""
    data = json.loads(body, parse_constant=_NotANumber, parse_float=_float)
    bad = _first_bad(data)
    if bad is not None:
        where, text = bad
        raise HTTPException(400, f"request: {where}: {text[:40]} is not a finite JSON number; send a number "
                                 "in the field's range")
    return data


class StrictJsonRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = loads(await self.body())
        return self._json


class StrictJsonRoute(APIRoute):
    """An ``APIRoute`` whose endpoint reads its JSON body through ``loads``."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            return await handler(StrictJsonRequest(request.scope, request.receive))

        return strict
