"""Daemon configuration: which providers are enabled, the reconciler's timings, logs, metrics.

Every option has a default, so no file is needed (the embedded default is the ``local``
provider, SQLite under ``$GPUORCH_HOME`` and a 2 s poll). Where the values come from, and in
which order they override each other, is ``config_sources``; its ``load_config`` is the entry
point (it depends on this module, never the reverse).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from gpuorch.bounds import MAX_USD, Integer, Number
from gpuorch.money.caps import Policy
from gpuorch.policy.recovery import DEFAULT_STRATEGY, get_strategy
from gpuorch.store.paths import default_home, default_url

DEFAULT_METRICS_PORT = 9347
DAY_S, YEAR_S = 86400.0, 366 * 86400.0
_DB_URL = re.compile(r"(sqlite(\+pysqlite)?:///[^\0\s]*|postgres(ql)?(\+(psycopg|psycopg2|asyncpg|pg8000))?://[^\0\s]+)")


class MetricsConfig(BaseModel):
    """The Prometheus endpoint the daemon serves (``/metrics``)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # inf would fail every pass

    enabled: bool = True
    host: str = "127.0.0.1"  # loopback: nothing outside this host scrapes unless you say so
    port: Integer = Field(default=DEFAULT_METRICS_PORT, ge=0, le=65535)  # 0: any free port

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"


class ApiConfig(BaseModel):
    """The optional HTTP API (``gpuorch serve``, or the daemon itself with ``enabled``)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # inf would fail every pass

    enabled: bool = False  # the daemon serves the API from its own process
    host: str = "127.0.0.1"  # loopback by default: reach it through an SSH tunnel or a TLS proxy
    port: Integer = Field(default=8765, ge=0, le=65535)
    token: SecretStr | None = None  # GPUORCH_API_TOKEN wins; SecretStr keeps it out of reprs and logs
    token_file: Path | None = None  # read at start (e.g. a systemd credential)
    # Limits on what one request may make the server hold or write (docs/operations.md "Security").
    max_body_bytes: Integer = Field(default=96 << 20, ge=1024, le=1 << 34)  # a base64 upload is 4/3 of its tar
    max_upload_bytes: Integer = Field(default=512 << 20, ge=1, le=1 << 40)  # an upload's files, once unpacked
    max_upload_files: Integer = Field(default=10_000, ge=1, le=10_000_000)  # entries in an upload


class DaemonConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # inf would fail every pass

    home: Path = Field(default_factory=default_home)
    database_url: str | None = None  # default: sqlite:///$GPUORCH_HOME/state.db
    # provider name (entry point in group gpuorch.providers) -> its options
    providers: dict[str, dict[str, Any]] = Field(default_factory=lambda: {"local": dict[str, Any]()})
    poll_s: Number = Field(default=2.0, gt=0, le=DAY_S)
    lease_s: Number = Field(default=60.0, gt=0, le=DAY_S)
    max_sleep_s: Number = Field(default=5.0, gt=0, le=DAY_S)  # the daemon looks at least this often
    drain_timeout_s: Number = Field(default=30.0, gt=0, le=DAY_S)  # on SIGTERM, how long the in-flight pass may take
    log_format: Literal["text", "json"] = "text"
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    daily_budget: Number | None = Field(default=None, gt=0, le=MAX_USD)  # USD per UTC day, all jobs together
    budget_stop_grace_s: Number = Field(default=120.0, gt=0, le=DAY_S)  # a budget stop's final checkpoint
    api: ApiConfig = Field(default_factory=ApiConfig)
    # Where a preempted job goes next, unless its spec says (gpuorch.policy.recovery).
    recovery_strategy: str = DEFAULT_STRATEGY
    # a market that preempted a job goes last this long
    avoid_preempted_zone_s: Number = Field(default=3600.0, ge=0, le=YEAR_S)
    # The agents' dead-man switch: an agent that hears nothing from this daemon for this long
    # takes a final checkpoint and shuts its instance down. None: never.
    heartbeat_timeout_s: Number | None = Field(default=600.0, gt=0, le=YEAR_S)
    # Cloud-side backstop where the provider has one: the cloud ends an instance this old even if
    # both this daemon and the agent are gone. None: none.
    max_instance_lifetime_s: Number | None = Field(default=7 * 24 * 3600.0, gt=0, le=YEAR_S)
    backoff_s: Number = Field(default=300.0, gt=0, le=YEAR_S)  # an offer class that had no capacity rests this long
    # How often the daemon refreshes the catalogs of providers with live price APIs (GCP, Azure:
    # gpuorch.ops.catalog_refresh), keeping the last good one on failure. None: never (AWS's offers
    # are read live every offers TTL anyway).
    catalog_refresh_s: Number | None = Field(default=6 * 3600.0, ge=60, le=YEAR_S)

    @field_validator("recovery_strategy")
    @classmethod
    def _strategy(cls, v: str) -> str:
        try:
            get_strategy(v)
        except KeyError as e:
            raise ValueError(e.args[0]) from None
        return v

    @field_validator("home")
    @classmethod
    def _expand_home(cls, v: Path) -> Path:
        return v.expanduser()

    @field_validator("database_url")
    @classmethod
    def _database_url(cls, v: str | None) -> str | None:
        """A URL SQLAlchemy can open with a driver gpuorch supports (checked without importing it:
        the CLI reads the configuration on every command)."""
        if v is not None and not _DB_URL.fullmatch(v):
            raise ValueError(f"cannot use {v.split('@')[-1]!r}; write sqlite:////abs/path/state.db or "
                             "postgresql+psycopg://user@host/db")
        return v

    @field_validator("providers", mode="before")
    @classmethod
    def _null_options(cls, v: Any) -> Any:
        # `local:` with nothing after it means "enabled, default options"
        return {k: ({} if o is None else o) for k, o in v.items()} if isinstance(v, dict) else v

    @model_validator(mode="after")
    def _lease_outlives_passes(self) -> DaemonConfig:
        # A live daemon renews at every pass; a lease shorter than a few passes would lapse
        # between them and let other daemons take its jobs back and forth.
        if self.lease_s < 3 * self.max_sleep_s:
            raise ValueError(f"lease_s ({self.lease_s:g}) must be at least 3 x max_sleep_s ({self.max_sleep_s:g}); "
                             "raise lease_s or lower max_sleep_s")
        return self

    def budget_policy(self) -> Policy:
        """Caps as the reconciler enforces them (docs/money.md). The decision interval allows
        a slow pass on top of the longest sleep between passes."""
        return Policy(daily_cap=self.daily_budget, decision_interval_s=max(30.0, 6 * self.max_sleep_s),
                      stop_grace_s=self.budget_stop_grace_s)

    @property
    def url(self) -> str:
        return self.database_url or default_url(self.home)
