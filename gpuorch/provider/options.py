"""An adapter's ``providers.<name>`` options, validated into its pydantic model, one line per mistake.

``validate_options`` turns pydantic's ValidationError into the one-line UserInputError every
adapter gives (DESIGN.md 6.10): ``providers.<name>.<field>: <what is wrong>; <the fix>``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from gpuorch.bounds import fix_hint  # adapters take it from here (the kit): their own parsers use it too
from gpuorch.errors import UserInputError

M = TypeVar("M", bound=BaseModel)


def validate_options(model: type[M], options: Mapping[str, Any] | None, provider: str, *,
                     required: str | Callable[[str], str] = "see the provider's docs",
                     explain: Callable[[ErrorDetails, str], str | None] | None = None,
                     known: Callable[[type[M]], list[str]] = lambda m: list(m.model_fields)) -> M:
    """``model`` validated from ``options``; UserInputError naming the option and the fix.

    Only the first error is told. ``required``: the fix for a missing option (text, or a function of
    the option's name); ``explain(error, where)``: an adapter's own message for an error, or None for
    the generic one; ``known``: the option names an unknown one is told. A model-level check
    (no location) may name its field itself, as ``FIELD: message``.
    """
    try:
        return model.model_validate(options or {})
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        own = explain(err, where) if explain is not None else None
        if own is not None:
            msg = own
        elif err["type"] == "missing":
            msg = f"is required; {required(where) if callable(required) else required}"
        elif err["type"] == "extra_forbidden":
            msg = f"unknown option; known: {', '.join(known(model))}"
        elif (hint := fix_hint(err)) is not None:
            msg = hint
        elif not where and ": " in msg and msg.split(": ", 1)[0].split(".")[0] in model.model_fields:
            where, msg = msg.split(": ", 1)
        raise UserInputError(f"providers.{provider}{'.' + where if where else ''}: {msg}") from None
