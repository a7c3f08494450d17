"""Daemon configuration: which providers are enabled, and the reconciler's timings.

Read from ``--config FILE`` or ``$GPUORCH_HOME/config.yaml``; absent, the embedded default is the
``local`` provider, SQLite under ``$GPUORCH_HOME`` and a 2 s poll.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .errors import UserInputError
from .recovery import DEFAULT_STRATEGY, get_strategy
from .store.db import default_home, default_url


class DaemonConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    home: Path = Field(default_factory=default_home)
    database_url: str | None = None  # default: sqlite:///$GPUORCH_HOME/state.db
    # provider name (entry point in group gpuorch.providers) -> its options
    providers: dict[str, dict[str, Any]] = Field(default_factory=lambda: {"local": {}})
    poll_s: float = Field(default=2.0, gt=0)
    lease_s: float = Field(default=60.0, gt=0)
    max_sleep_s: float = Field(default=5.0, gt=0)  # the daemon looks at least this often
    # Where a preempted job goes next, unless its spec says (gpuorch.recovery).
    recovery_strategy: str = DEFAULT_STRATEGY
    avoid_preempted_zone_s: float = Field(default=3600.0, ge=0)  # a market that preempted a job goes last this long
    # The agents' dead-man switch: an agent that hears nothing from this daemon for this long
    # takes a final checkpoint and shuts its instance down. None: never.
    heartbeat_timeout_s: float | None = Field(default=600.0, gt=0)
    # Cloud-side backstop where the provider has one: the cloud ends an instance this old even if
    # both this daemon and the agent are gone. None: none.
    max_instance_lifetime_s: float | None = Field(default=7 * 24 * 3600.0, gt=0)
    backoff_s: float = Field(default=300.0, gt=0)  # an offer class that had no capacity rests this long

    @field_validator("recovery_strategy")
    @classmethod
    def _strategy(cls, v: str) -> str:
        try:
            get_strategy(v)
        except KeyError as e:
            raise ValueError(e.args[0]) from None
        return v

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
        raise UserInputError(f"{p}: {loc}: {err['msg']}") from None
