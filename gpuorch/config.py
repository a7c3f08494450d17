"""Daemon configuration: which providers are enabled, and the reconciler's timings.

Read from ``--config FILE`` or ``$GPUORCH_HOME/config.yaml``; absent, the embedded default is the
``local`` provider, SQLite under ``$GPUORCH_HOME`` and a 2 s poll.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator

from .errors import UserInputError
from .store.db import default_home, default_url


class ApiConfig(BaseModel):
    """The optional HTTP API (``gpuorch serve``, or the daemon itself with ``enabled``)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False  # the daemon serves the API from its own process
    host: str = "127.0.0.1"  # loopback by default: reach it through an SSH tunnel or a TLS proxy
    port: int = Field(default=8765, ge=0, le=65535)
    token: SecretStr | None = None  # GPUORCH_API_TOKEN wins; SecretStr keeps it out of reprs and logs
    token_file: Path | None = None  # read at start (e.g. a systemd credential)


class DaemonConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    home: Path = Field(default_factory=default_home)
    database_url: str | None = None  # default: sqlite:///$GPUORCH_HOME/state.db
    # provider name (entry point in group gpuorch.providers) -> its options
    providers: dict[str, dict[str, Any]] = Field(default_factory=lambda: {"local": {}})
    poll_s: float = Field(default=2.0, gt=0)
    lease_s: float = Field(default=60.0, gt=0)
    max_sleep_s: float = Field(default=5.0, gt=0)  # the daemon looks at least this often
    api: ApiConfig = Field(default_factory=ApiConfig)

    @model_validator(mode="after")
    def _lease_outlives_passes(self) -> DaemonConfig:
        # A live daemon renews at every pass; a lease shorter than a few passes would lapse
        # between them and let other daemons take its jobs back and forth.
        if self.lease_s < 3 * self.max_sleep_s:
            raise ValueError(f"lease_s ({self.lease_s:g}) must be at least 3 x max_sleep_s ({self.max_sleep_s:g}); "
                             "raise lease_s or lower max_sleep_s")
        return self

    @property
    def url(self) -> str:
        return self.database_url or default_url(self.home)


def load_config(path: str | Path | None = None) -> DaemonConfig:
    p = Path(path) if path else default_home() / "config.yaml"
    if not p.exists():
        if path:
            raise UserInputError(f"--config: {p} does not exist; give the path of a config.yaml")
        return DaemonConfig()
    try:
        data = yaml.safe_load(p.read_text()) or {}
        return DaemonConfig.model_validate(data)
    except yaml.YAMLError as e:
        raise UserInputError(f"{p}: malformed YAML ({e}); fix the syntax") from None
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        raise UserInputError(f"{p}: {loc}: {msg}" if loc else f"{p}: {msg}") from None
