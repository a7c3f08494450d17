"""Where the daemon configuration comes from, and which source wins.

Sources, lowest precedence first; each later one overrides the earlier ones key by key:

1. the defaults in ``DaemonConfig``;
2. the system file ``/etc/gpuorch/config.yaml`` (``$CONFIGURATION_DIRECTORY/config.yaml`` when
   systemd's ``ConfigurationDirectory=`` sets that variable);
3. the user file ``$XDG_CONFIG_HOME/gpuorch/config.yaml`` (default ``~/.config``);
4. the state directory's own file ``$GPUORCH_HOME/config.yaml`` (``home`` cannot be set there);
5. the file given with ``--config`` (or ``$GPUORCH_CONFIG``), which must exist;
6. environment variables ``GPUORCH_<FIELD>``: ``GPUORCH_POLL_S=0.5``, ``GPUORCH_HOME=/srv/g``,
   ``GPUORCH_DATABASE_URL=...``; nested fields join with a double underscore
   (``GPUORCH_METRICS__PORT=9100``); mapping fields take YAML (``GPUORCH_PROVIDERS='{local: {}}'``);
   an empty variable counts as unset.

Merging: mappings merge key by key at every depth, except ``providers``, which a later source
replaces whole (the set of enabled providers is one decision). A key set to ``null`` in a later
source removes what earlier ones set (back to the default). The state directory is resolved
first, from ``GPUORCH_HOME``, else ``home`` in sources 5, 3, 2, else the default.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuorch.bounds import fix_hint
from gpuorch.errors import UserInputError, field_path
from gpuorch.store.paths import default_home, default_url

if TYPE_CHECKING:  # pydantic, YAML and the model load with the first full ``load`` (see store_location)
    from pydantic import BaseModel, ValidationError

    from gpuorch.ops.config import DaemonConfig

ENV_PREFIX = "GPUORCH_"
REPLACED_WHOLE = {"providers"}
Origins = dict[tuple[str, ...], str]


@dataclass
class Loaded:
    config: DaemonConfig
    sources: list[str] = field(default_factory=list)  # files and variables that set something
    files: list[Path] = field(default_factory=list)


def system_file(env: Mapping[str, str]) -> Path:
    configured = env.get("CONFIGURATION_DIRECTORY", "").split(":")[0]
    return Path(configured or "/etc/gpuorch") / "config.yaml"


def user_file(env: Mapping[str, str]) -> Path:
    return Path(env.get("XDG_CONFIG_HOME") or "~/.config").expanduser() / "gpuorch" / "config.yaml"


# Variables that are not DaemonConfig fields, or that store_location reads itself.
_LOCATION_VARS = {"GPUORCH_HOME", "GPUORCH_DATABASE_URL", "GPUORCH_CONFIG", "GPUORCH_SERVER", "GPUORCH_API_TOKEN"}


def store_location(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> tuple[Path, str] | None:
    """``(home, database URL)`` exactly as ``load(path, env).config`` would give them, without
    reading YAML or building the pydantic model -- or None when that shortcut does not apply:
    a configuration file exists (it could set or break anything) or another ``GPUORCH_*``
    variable is set. Read-only commands (``gpuorch status``) use it to start fast; every other
    case goes through ``load``, so a bad configuration still fails the command the same way."""
    env = os.environ if env is None else env
    if path or any(k.startswith(ENV_PREFIX) and v and k not in _LOCATION_VARS for k, v in env.items()):
        return None
    home = Path(env["GPUORCH_HOME"]).expanduser() if env.get("GPUORCH_HOME") else default_home()
    for file in (system_file(env), user_file(env), home / "config.yaml"):
        if os.path.lexists(file):
            return None
    return home, env.get("GPUORCH_DATABASE_URL") or default_url(home)


def read_file(path: Path, *, required: bool = False, label: str | None = None) -> dict[str, Any] | None:
    """The mapping in a YAML file; None if it is absent and not ``required``."""
    label = label or str(path)
    try:  # the common mistakes get their own fix
        if stat.S_ISDIR(os.stat(path).st_mode):
            raise IsADirectoryError
        if not os.access(path, os.R_OK):
            raise PermissionError
    except (FileNotFoundError, NotADirectoryError):
        if required:
            raise UserInputError(f"{label}: {path} does not exist; give the path of a config.yaml") from None
        return None
    except PermissionError:
        raise UserInputError(f"{label}: {path} is not readable by this user; "
                             "fix its permissions (e.g. chmod 0640, group gpuorch)") from None
    except IsADirectoryError:
        raise UserInputError(f"{label}: {path} is a directory; give the path of a config.yaml") from None
    # YAML only once a file is there: most hosts have no system or user file.
    from gpuorch.jobs.yamlsafe import MAX_BYTES, loads  # unique keys, no aliases or tags, bounded
    from gpuorch.userfile import read_text

    # Bounded, and a device (/dev/zero) or socket refused: the file is read on every command.
    text = read_text(path, option=label, what="a config.yaml", limit=MAX_BYTES)

    data = loads(text, label)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UserInputError(f"{label}: the file must hold a mapping of options (home: ..., poll_s: ...)")
    return data


def env_layer(env: Mapping[str, str], model: type[BaseModel] | None = None,
              prefix: str = ENV_PREFIX, path: tuple[str, ...] = ()) -> tuple[dict[str, Any], Origins]:
    """The ``GPUORCH_<FIELD>`` variables that name a field of ``model`` (default DaemonConfig;
    others are ignored)."""
    from pydantic import BaseModel

    from gpuorch.ops.config import DaemonConfig

    model = model or DaemonConfig
    data: dict[str, Any] = {}
    origins: Origins = {}
    for name, info in model.model_fields.items():
        var = f"{prefix}{name.upper()}"
        sub = info.annotation if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel) else None
        if sub is not None:
            nested, nested_origins = env_layer(env, sub, var + "__", path + (name,))
            if nested:
                data[name] = nested
                origins.update(nested_origins)
            continue
        if not env.get(var):  # unset or empty: not an override
            continue
        value: Any = env[var]
        if name in REPLACED_WHOLE:
            import yaml

            try:
                value = yaml.safe_load(value)
            except yaml.YAMLError:
                raise UserInputError(f"{var}: malformed YAML; write a mapping such as '{{local: {{}}}}'") from None
        data[name] = value
        origins[path + (name,)] = var
    return data, origins


def merge(base: dict[str, Any], over: Mapping[str, Any], origins: Origins, source: str,
          path: tuple[str, ...] = ()) -> dict[str, Any]:
    """``over`` on top of ``base`` (see the module docstring); records who set each key."""
    out = dict(base)
    for key, value in over.items():
        where = path + (str(key),)
        if value is None and key in out and key not in REPLACED_WHOLE:
            del out[key]
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping) and key not in REPLACED_WHOLE:
            out[key] = merge(dict(out[key]), value, origins, source, where)
            continue
        else:
            out[key] = value
        origins[where] = source
    return out


def load_config(path: str | Path | None = None) -> DaemonConfig:
    """The effective configuration: files, then ``--config`` (``path``), then ``GPUORCH_*``.

    Raises UserInputError with one line naming the source, the field and the fix.
    """
    return load(path).config


def load(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> Loaded:
    """Read every source, merge them, validate. Raises UserInputError (one line)."""
    from pydantic import ValidationError

    from gpuorch.ops.config import DaemonConfig

    env = os.environ if env is None else env
    layers: list[tuple[str, Path | None, dict[str, Any]]] = []
    for file in (system_file(env), user_file(env)):
        data = read_file(file)
        if data is not None:
            layers.append((str(file), file, data))
    explicit = None
    if path:
        p = Path(path).expanduser()
        explicit = (f"--config {p}", p, read_file(p, required=True, label="--config") or {})
    env_data, env_origins = env_layer(env)

    home = _home(env_data, [explicit] if explicit else [], layers)
    state_file = home / "config.yaml"
    if explicit is None or explicit[1] is None or explicit[1].resolve() != state_file.resolve():
        data = read_file(state_file)
        if data is not None:
            if "home" in data:
                raise UserInputError(f"{state_file}: home: cannot be set in the state directory's own config; "
                                     "set it in /etc/gpuorch/config.yaml, --config or GPUORCH_HOME")
            layers.append((str(state_file), state_file, data))
    if explicit:
        layers.append(explicit)

    merged: dict[str, Any] = {}
    origins: Origins = {}
    for name, _, data in layers:
        merged = merge(merged, data, origins, name)
    merged = merge(merged, env_data, origins, "environment")
    origins.update(env_origins)
    merged.setdefault("home", home)
    try:
        config = DaemonConfig.model_validate(merged)
    except ValidationError as e:
        raise UserInputError(describe(e, origins)) from None
    sources = [n for n, _, _ in layers] + sorted(set(env_origins.values()))
    return Loaded(config, sources, [f for _, f, _ in layers if f is not None])


def _home(env_data: dict[str, Any], *groups: list[tuple[str, Path | None, dict[str, Any]]]) -> Path:
    if "home" in env_data:
        return Path(env_data["home"]).expanduser()
    for group in groups:
        for _, _, data in reversed(group):
            if data.get("home"):
                return Path(str(data["home"])).expanduser()
    return default_home()


def describe(e: ValidationError, origins: Origins) -> str:
    """One line: the source that set the bad value, the field, and the fix."""
    err = e.errors()[0]
    loc = tuple(str(x) for x in err["loc"])
    field_name = field_path(loc)
    source = next((origins[loc[:i]] for i in range(len(loc), 0, -1) if loc[:i] in origins), "config")
    if err["type"] == "extra_forbidden":
        known = _known(loc[:-1])
        msg = f"unknown option; known options here: {', '.join(known)}" if known else "unknown option; remove it"
    else:
        msg = fix_hint(err) or str(err["msg"]).removeprefix("Value error, ")
    more = len(e.errors()) - 1
    return f"{source}: {field_name}: {msg}" + (f" (and {more} more problem{'s' * (more > 1)})" if more else "")


def _known(path: tuple[str, ...]) -> list[str]:
    from pydantic import BaseModel

    from gpuorch.ops.config import DaemonConfig

    model: type[BaseModel] = DaemonConfig
    for part in path:
        info = model.model_fields.get(part)
        ann = info.annotation if info else None
        if not (isinstance(ann, type) and issubclass(ann, BaseModel)):
            return []
        model = ann
    return list(model.model_fields)
