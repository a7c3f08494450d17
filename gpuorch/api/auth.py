"""Bearer-token authentication for the HTTP API. Standard library only.

One shared token per installation: from ``GPUORCH_API_TOKEN``, else ``api.token``, else the file
``api.token_file``. Compared in constant time. Neither the token nor the one a client sent is
ever put into a log line or an error message.
"""

from __future__ import annotations

import hmac
import os

from gpuorch.errors import UserInputError
from gpuorch.ops.config import ApiConfig
from gpuorch.userfile import read_text

ENV = "GPUORCH_API_TOKEN"
MIN_LENGTH = 16
MAX_TOKEN_FILE = 64 << 10  # a token is a line; a systemd credential file holds just it
MAKE_ONE = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"


def server_token(api: ApiConfig) -> str:
    """The token the server accepts. Raises UserInputError when none is set or it is too short."""
    token = os.environ.get(ENV) or (api.token.get_secret_value() if api.token else None)
    if not token and api.token_file is not None:  # bounded: /dev/zero is refused, not read until memory ends
        token = read_text(api.token_file, option="api.token_file", what="a file holding the API token",
                          limit=MAX_TOKEN_FILE).strip()
    if not token:
        raise UserInputError(f"api.token: the HTTP API needs a token; set {ENV}, api.token or api.token_file "
                             f"(make one with {MAKE_ONE})")
    if len(token) < MIN_LENGTH:
        raise UserInputError(f"api.token: too short ({len(token)} characters); use at least {MIN_LENGTH} random "
                             f"characters, e.g. from {MAKE_ONE}")
    return token


def check(authorization: str | None, token: str) -> str | None:
    """None if the ``Authorization`` header carries the token; else why not, for the client."""
    scheme, _, given = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        return f"missing API token; pass --token or set {ENV}"
    if not hmac.compare_digest(given.strip().encode(), token.encode()):
        return f"the API token was not accepted; check --token or {ENV}"
    return None
