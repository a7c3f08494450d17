"""Daemon configuration: which providers are enabled, the reconciler's timings, logs, metrics.

Every option has a default, so no file is needed (the embedded default is the ``local``
provider, SQLite under ``$GPUORCH_HOME`` and a 2 s poll). Where the values come from, and in
which order they override each other, is ``config_sources``; its ``load_config`` is the entry
point (it depends on this module, never the reverse).

Every CLI command reads the configuration, so importing this module stays cheap: the models build
their validators on first use (``defer_build``), and ``defaults`` makes the configuration of a
host with no file and no variable without validating anything (``gpuorch offers``'s cold start,
docs/benchmarks.md).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from gpuorch.bounds import MAX_USD, Integer, Number
from gpuorch.notify.kinds import NOTIFY_TYPES
from gpuorch.store.paths import default_home, default_url

if TYPE_CHECKING:  # imported when used: the CLI's start-up needs neither
    from gpuorch.money.caps import Policy

DEFAULT_METRICS_PORT = 9347
# gpuorch.policy.recovery.DEFAULT_STRATEGY, written out: importing the policies would cost every
# command's start-up (tests/ops/test_config_defaults.py holds the two equal).
DEFAULT_STRATEGY = "same-region-first"
# Build each model's validator when it is first used, not at import (see the module docstring).
_MODEL = ConfigDict(extra="forbid", allow_inf_nan=False, defer_build=True)
DAY_S, YEAR_S = 86400.0, 366 * 86400.0
# Patterns as text: ``re`` compiles (and caches) each on first use, not at every CLI start.
_DB_URL = r"(sqlite(\+pysqlite)?:///[^\0\s]*|postgres(ql)?(\+(psycopg|psycopg2|asyncpg|pg8000))?://[^\0\s]+)"


class MetricsConfig(BaseModel):
    """The Prometheus endpoint the daemon serves (``/metrics``)."""

    model_config = _MODEL  # inf would fail every pass

    enabled: bool = True
    host: str = "127.0.0.1"  # loopback: nothing outside this host scrapes unless you say so
    port: Integer = Field(default=DEFAULT_METRICS_PORT, ge=0, le=65535)  # 0: any free port

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"


class ApiConfig(BaseModel):
    """The optional HTTP API (``gpuorch serve``, or the daemon itself with ``enabled``)."""

    model_config = _MODEL  # inf would fail every pass

    enabled: bool = False  # the daemon serves the API from its own process
    host: str = "127.0.0.1"  # loopback by default: reach it through an SSH tunnel or a TLS proxy
    port: Integer = Field(default=8765, ge=0, le=65535)
    token: SecretStr | None = None  # GPUORCH_API_TOKEN wins; SecretStr keeps it out of reprs and logs
    token_file: Path | None = None  # read at start (e.g. a systemd credential)
    # Limits on what one request may make the server hold or write (docs/operations.md "Security").
    max_body_bytes: Integer = Field(default=96 << 20, ge=1024, le=1 << 34)  # a base64 upload is 4/3 of its tar
    max_upload_bytes: Integer = Field(default=512 << 20, ge=1, le=1 << 40)  # an upload's files, once unpacked
    max_upload_files: Integer = Field(default=10_000, ge=1, le=10_000_000)  # entries in an upload


_ENV_NAME = r"[A-Za-z_][A-Za-z0-9_]{0,127}"
_TIME_OF_DAY = r"([01][0-9]|2[0-3]):[0-5][0-9]"
_ROUTE_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"


def _http_url(v: str) -> str:
    """An absolute http(s) URL with a host and nothing a header or a log line could be split by."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(v)
        parts.port  # noqa: B018  (raises ValueError for a port that is not a number in range)
    except ValueError:
        parts = None
    if (parts is None or parts.scheme not in ("http", "https") or not parts.hostname or len(v) > 2048
            or any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in v)):
        raise ValueError("not an http(s) URL; write https://host/path (a secret in it may come from url_env or "
                         "url_file)")
    return v


class _Route(BaseModel):
    """What every route shares: its name (in the store, never its URL), where its URL comes
    from, and which events reach it (all, unless ``events``, ``jobs`` or ``sweeps`` narrow it)."""

    model_config = _MODEL

    name: str | None = None
    url: SecretStr | None = None  # SecretStr: a token in the URL stays out of reprs and logs
    url_env: str | None = None
    url_file: Path | None = None
    events: list[str] | None = Field(default=None, max_length=len(NOTIFY_TYPES))
    jobs: list[str] | None = Field(default=None, max_length=1000)  # job names, shell patterns (train-*)
    sweeps: list[str] | None = Field(default=None, max_length=1000)  # sweep names, shell patterns

    @field_validator("name")
    @classmethod
    def _name(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(_ROUTE_NAME, v):
            raise ValueError("write 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit")
        return v

    @field_validator("url_env")
    @classmethod
    def _env(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(_ENV_NAME, v):
            raise ValueError("not an environment variable name; write e.g. GPUORCH_SLACK_URL")
        return v

    @field_validator("events")
    @classmethod
    def _events(cls, v: list[str] | None) -> list[str] | None:
        for kind in v or []:
            if kind not in NOTIFY_TYPES:
                raise ValueError(f"unknown event {kind[:64]!r}; known events: {', '.join(NOTIFY_TYPES)}")
        return v

    @field_validator("jobs", "sweeps")
    @classmethod
    def _patterns(cls, v: list[str] | None) -> list[str] | None:
        for pattern in v or []:
            if not 0 < len(pattern) <= 256 or any(ord(c) < 32 for c in pattern):
                raise ValueError("write names or shell patterns (train-*) of 1 to 256 printable characters")
        return v

    @model_validator(mode="after")
    def _one_source(self) -> _Route:
        given = [k for k in ("url", "url_env", "url_file") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of url, url_env (an environment variable holding it) or url_file "
                             f"(a file holding it); {'found ' + ' and '.join(given) if given else 'none given'}")
        return self


class WebhookRoute(_Route):
    """A Standard Webhooks endpoint: signed with the key in ``secret_file`` or ``$secret_env``
    (``whsec_`` + base64 of 24 to 64 bytes), read when the daemon starts, never stored."""

    secret_file: Path | None = None
    secret_env: str | None = None
    timeout_s: Number = Field(default=10.0, gt=0, le=300)

    @field_validator("url")
    @classmethod
    def _url(cls, v: SecretStr | None) -> SecretStr | None:
        if v is not None:
            _http_url(v.get_secret_value())
        return v

    @field_validator("secret_env")
    @classmethod
    def _secret_env(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(_ENV_NAME, v):
            raise ValueError("not an environment variable name; write e.g. GPUORCH_WEBHOOK_SECRET")
        return v

    @model_validator(mode="after")
    def _secret(self) -> WebhookRoute:
        if (self.secret_file is None) == (self.secret_env is None):
            raise ValueError("give exactly one of secret_file (a file holding the signing key, whsec_...) or "
                             "secret_env (an environment variable holding it)")
        return self


class AppriseRoute(_Route):
    """A chat or other channel by its apprise URL (slack://, discord://, tgram://, ntfy://,
    mailto://, json://...); checked by apprise itself when the daemon starts."""

    @field_validator("url")
    @classmethod
    def _url(cls, v: SecretStr | None) -> SecretStr | None:
        text = v.get_secret_value() if v is not None else ""
        if v is not None and (not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*://\S+", text) or len(text) > 4096):
            raise ValueError("not an apprise URL; write service://... (e.g. slack://T/B/C or ntfy://topic)")
        return v


class NotificationsConfig(BaseModel):
    """Where events are told (docs/notifications.md): signed webhooks and apprise channels,
    delivered at least once with retries and back-off, and the morning report."""

    model_config = _MODEL

    webhooks: list[WebhookRoute] = Field(default_factory=list, max_length=100)
    apprise: list[AppriseRoute] = Field(default_factory=list, max_length=100)
    report_at: str | None = None  # "07:30": the morning report of the sweeps that ended since the last one
    max_tries: Integer = Field(default=25, ge=1, le=1000)  # then the delivery is dead (logged, an event)
    backoff_s: Number = Field(default=5.0, gt=0, le=DAY_S)  # the first retry's wait; doubles each try
    max_backoff_s: Number = Field(default=3600.0, gt=0, le=DAY_S)
    log_lines: Integer = Field(default=20, ge=0, le=1000)  # a failed job's last log lines in its message

    @field_validator("apprise", mode="before")
    @classmethod
    def _plain_urls(cls, v: Any) -> Any:
        return [{"url": x} if isinstance(x, str) else x for x in v] if isinstance(v, list) else v

    @field_validator("report_at")
    @classmethod
    def _report_at(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(_TIME_OF_DAY, v):
            raise ValueError("not a time of day; write HH:MM on a 24-hour clock, e.g. \"07:30\"")
        return v

    @model_validator(mode="after")
    def _unique_names(self) -> NotificationsConfig:
        names = [r.name for r in [*self.webhooks, *self.apprise] if r.name is not None]
        if len(names) != len(set(names)):
            raise ValueError("two routes have the same name; give each route its own name")
        return self

    @property
    def enabled(self) -> bool:
        return bool(self.webhooks or self.apprise)


class DaemonConfig(BaseModel):
    model_config = _MODEL  # inf would fail every pass

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
    notifications: NotificationsConfig = Field(default_factory=NotificationsConfig)
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
    # Price lists the user keeps (gpuorch's CSV or gpuhunt's), audited row by row: a provider their
    # rows name is priced from them alone (gpuorch.provider.pricelists). ``catalog_strict``: a
    # malformed row refuses the configuration instead of being left out with a warning.
    catalog_files: list[Path] = Field(default_factory=list, max_length=64)
    catalog_strict: bool = False

    @field_validator("recovery_strategy")
    @classmethod
    def _strategy(cls, v: str) -> str:
        from gpuorch.policy.recovery import get_strategy

        try:
            get_strategy(v)
        except KeyError as e:
            raise ValueError(e.args[0]) from None
        return v

    @field_validator("home")
    @classmethod
    def _expand_home(cls, v: Path) -> Path:
        return v.expanduser()

    @field_validator("catalog_files")
    @classmethod
    def _expand_catalogs(cls, v: list[Path]) -> list[Path]:
        return [p.expanduser() for p in v]

    @field_validator("database_url")
    @classmethod
    def _database_url(cls, v: str | None) -> str | None:
        """A URL SQLAlchemy can open with a driver gpuorch supports (checked without importing it:
        the CLI reads the configuration on every command)."""
        if v is not None and not re.fullmatch(_DB_URL, v):
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
        from gpuorch.money.caps import Policy

        return Policy(daily_cap=self.daily_budget, decision_interval_s=max(30.0, 6 * self.max_sleep_s),
                      stop_grace_s=self.budget_stop_grace_s)

    @property
    def url(self) -> str:
        return self.database_url or default_url(self.home)


def defaults(home: Path) -> DaemonConfig:
    """``DaemonConfig.model_validate({"home": home})`` without validating: every field at its
    default, which the model's own checks accept (tests/ops/test_config_defaults.py holds the two
    equal). For a host with no configuration file and no ``GPUORCH_*`` option (``cli_config``)."""
    return DaemonConfig.model_construct(home=home, metrics=MetricsConfig.model_construct(),
                                        api=ApiConfig.model_construct(),
                                        notifications=NotificationsConfig.model_construct(), _fields_set={"home"})
