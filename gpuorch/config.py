"""Daemon configuration: which providers are enabled, and the reconciler's timings.

Read from ``--config FILE`` or ``$GPUORCH_HOME/config.yaml``; absent, the embedded default is the
``local`` provider, SQLite under ``$GPUORCH_HOME`` and a 2 s poll.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .budget import Policy
from .errors import UserInputError
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
    daily_budget: float | None = Field(default=None, gt=0)  # USD per UTC day, all jobs together
    budget_stop_grace_s: float = Field(default=120.0, gt=0)  # a budget stop's final checkpoint

    def budget_policy(self) -> Policy:
        """Caps as the reconciler enforces them (docs/money.md). The decision interval allows
        a slow pass on top of the longest sleep between passes."""
        return Policy(daily_cap=self.daily_budget, decision_interval_s=max(30.0, 6 * self.max_sleep_s),
                      stop_grace_s=self.budget_stop_grace_s)

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
