"""The Lambda provider's options (``providers.lambda`` in the daemon config) and its API key.

Options are checked statically, so a typo fails at start with one line naming the field and
the fix. The API key is never an option and never reaches the database or a log: it comes from
``$LAMBDA_API_KEY``, else from ``api_key_file`` (default ``~/.lambda_cloud/lambda_keys``, the
file Lambda's own tooling and SkyPilot keep: a line ``api_key = <key>``, or the key alone).
"""

from __future__ import annotations

import ipaddress
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import ErrorDetails

from gpuorch.errors import UserInputError
from gpuorch.provider.options import validate_options

from .api import DEFAULT_ENDPOINT

ENV_KEY = "LAMBDA_API_KEY"
DEFAULT_KEY_FILE = Path("~/.lambda_cloud/lambda_keys")
REGION = re.compile(r"[a-z]+(-[a-z]+)*-\d{1,2}")  # us-east-1, europe-central-1, asia-northeast-2
_KEY = re.compile(r"[A-Za-z0-9_.\-]{16,256}")
_KEY_LINE = re.compile(r"\s*api_key\s*[=:]\s*(\S+)\s*")
MAX_KEY_FILE = 4096


class LambdaOptions(BaseModel):
    """``providers.lambda`` options."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    regions: list[str] = Field(default_factory=list)  # launch only here; empty: every region
    endpoint: str = DEFAULT_ENDPOINT  # tests: a local fake (plain http only on a loopback address)
    api_key_file: Path | None = None  # default: ~/.lambda_cloud/lambda_keys when $LAMBDA_API_KEY is unset
    ssh_user: str = "ubuntu"  # Lambda Stack images' login user
    catalog: Path | None = None  # offers CSV for the offline checks; default: refreshed, else shipped
    offers_ttl_s: float = Field(default=300.0, ge=10, le=86400)  # how long a live listing of offers is kept
    # A launch whose answer was lost may still appear in the listing: no second launch for the same
    # token within this time (a crash between launch and record; docs/lambda.md, "Idempotency").
    launch_grace_s: float = Field(default=180.0, ge=0, le=3600)
    max_attempts: int = Field(default=4, ge=1, le=20)  # per API call, 429s and 5xx included
    retry_max_s: float = Field(default=30.0, gt=0, le=600)
    timeout_s: float = Field(default=30.0, gt=0, le=300)

    @field_validator("regions", mode="before")
    @classmethod
    def _listify(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v

    @field_validator("regions")
    @classmethod
    def _regions(cls, v: list[str]) -> list[str]:
        for r in v:
            if not REGION.fullmatch(r):
                raise ValueError(f"{r!r} is not a Lambda region name (like us-east-1)")
        if len(set(v)) != len(v):
            raise ValueError("lists a region twice")
        return v

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, v: str) -> str:
        u = urlsplit(v)
        if u.scheme not in ("https", "http") or not u.hostname:
            raise ValueError(f"{v!r} is not an http(s) URL")
        if u.scheme == "http" and not _loopback(u.hostname):  # the key would cross the network in clear
            raise ValueError(f"{v!r}: plain http only to a loopback address; use https")
        return v

    @field_validator("ssh_user")
    @classmethod
    def _user(cls, v: str) -> str:
        if not re.fullmatch(r"[a-z_][a-z0-9_-]{0,31}", v):
            raise ValueError(f"{v!r} is not a Unix user name")
        return v

    def allows(self, region: str) -> bool:
        return not self.regions or region in self.regions


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_options(options: dict[str, Any] | None) -> LambdaOptions:
    return validate_options(LambdaOptions, options, "lambda", explain=_explain,
                            known=lambda m: sorted(m.model_fields))


def _explain(err: ErrorDetails, where: str) -> str | None:
    if err["type"] == "model_type":  # not a mapping at all
        return f"{type(err['input']).__name__} is not a mapping; give a mapping of options"
    return None


def key_source(options: LambdaOptions, environ: Mapping[str, str] | None = None) -> tuple[str, Path | None]:
    """Where the key comes from: ("env", None), ("file", path) or ("none", the file looked at)."""
    env = os.environ if environ is None else environ
    if env.get(ENV_KEY, "").strip():
        return "env", None
    path = (options.api_key_file or DEFAULT_KEY_FILE).expanduser()
    return ("file" if path.exists() else "none"), path


def api_key(options: LambdaOptions, environ: Mapping[str, str] | None = None) -> str:
    """The API key; UserInputError (one line naming where to put it) when there is none or it is
    malformed. The key itself is never in a message."""
    env = os.environ if environ is None else environ
    source, path = key_source(options, env)
    fix = f"set {ENV_KEY} or put the key in providers.lambda.api_key_file (default {DEFAULT_KEY_FILE})"
    if source == "env":
        key = env[ENV_KEY].strip()
        where = f"${ENV_KEY}"
    elif source == "file":
        assert path is not None
        key, where = _read_key_file(path), str(path)
    else:
        raise UserInputError(f"providers.lambda: no Lambda Cloud API key; {fix} (create one at "
                             "https://cloud.lambda.ai/api-keys)")
    if not _KEY.fullmatch(key):
        raise UserInputError(f"providers.lambda: {where} does not hold a Lambda Cloud API key (16-256 letters, "
                             f"digits, '_', '-' or '.'); {fix}")
    return key


def _read_key_file(path: Path) -> str:
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise UserInputError(f"providers.lambda.api_key_file: {path} is not a regular file; give the key file")
        with open(path, encoding="utf-8") as f:
            text = f.read(MAX_KEY_FILE + 1)
    except (OSError, UnicodeDecodeError) as e:
        raise UserInputError(f"providers.lambda.api_key_file: cannot read {path} ({getattr(e, 'strerror', None) or e})"
                             "; check the path and its permissions") from None
    if len(text) > MAX_KEY_FILE:
        raise UserInputError(f"providers.lambda.api_key_file: {path} is larger than {MAX_KEY_FILE} bytes; give the "
                             "key file")
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    for ln in lines:
        m = _KEY_LINE.fullmatch(ln)
        if m:
            return m.group(1)
    return lines[0].strip() if len(lines) == 1 else ""
