"""Configuration sources, their precedence, field-level errors, and the global --config."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from gpuorch.cli import app
from gpuorch.errors import UserInputError
from gpuorch.ops.config import DaemonConfig, MetricsConfig
from gpuorch.ops.config_sources import load, load_config

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def files(_isolated_home):
    """Writers for the system, user and state-directory files (isolated by conftest)."""
    system = Path(os.environ["CONFIGURATION_DIRECTORY"]) / "config.yaml"
    user = Path(os.environ["XDG_CONFIG_HOME"]) / "gpuorch" / "config.yaml"
    state = _isolated_home / "config.yaml"

    def write(which: str, text: str) -> Path:
        p = {"system": system, "user": user, "state": state}[which]
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        return p

    return write


def test_no_file_gives_the_defaults(_isolated_home):
    loaded = load()
    assert loaded.config == DaemonConfig(home=_isolated_home)
    assert loaded.sources == ["GPUORCH_HOME"]


def test_later_sources_override_earlier_ones_key_by_key(files, tmp_path, monkeypatch):
    files("system", "poll_s: 1\nlease_s: 11\nmax_sleep_s: 7\ndrain_timeout_s: 9\n"
                    "metrics: {port: 9001, host: 0.0.0.0}\n")
    files("user", "poll_s: 2\nlease_s: 22\nmax_sleep_s: 8\n")
    files("state", "poll_s: 3\nlease_s: 33\n")
    explicit = tmp_path / "explicit.yaml"
    explicit.write_text("poll_s: 4\nmetrics: {port: 9002}\n")
    monkeypatch.setenv("GPUORCH_POLL_S", "5")
    loaded = load(explicit)
    c = loaded.config
    assert (c.poll_s, c.lease_s, c.max_sleep_s, c.drain_timeout_s) == (5, 33, 8, 9)
    assert c.metrics == MetricsConfig(port=9002, host="0.0.0.0")  # merged per key inside `metrics` too
    assert loaded.sources[:4] == [str(Path(os.environ["CONFIGURATION_DIRECTORY"]) / "config.yaml"),
                                  str(Path(os.environ["XDG_CONFIG_HOME"]) / "gpuorch" / "config.yaml"),
                                  str(Path(os.environ["GPUORCH_HOME"]) / "config.yaml"), f"--config {explicit}"]
    assert "GPUORCH_POLL_S" in loaded.sources


def test_providers_are_replaced_whole_and_null_removes_an_inherited_value(files):
    files("system", "providers: {local: {boot_s: 1}, aws: {region: us-east-1}}\ndatabase_url: sqlite:////srv/x.db\n")
    files("user", "providers: {local: }\ndatabase_url: null\n")
    c = load_config()
    assert c.providers == {"local": {}}
    assert c.database_url is None and c.url.endswith("state.db")


def test_home_comes_from_the_environment_then_files_and_selects_the_state_file(files, tmp_path, monkeypatch):
    monkeypatch.delenv("GPUORCH_HOME")
    other = tmp_path / "elsewhere"
    (other).mkdir()
    (other / "config.yaml").write_text("poll_s: 0.25\n")
    files("system", f"home: {other}\n")
    c = load_config()
    assert c.home == other and c.poll_s == 0.25
    monkeypatch.setenv("GPUORCH_HOME", str(tmp_path / "env-home"))
    assert load_config().home == tmp_path / "env-home"


def test_environment_overrides_nested_fields_and_mappings(monkeypatch):
    monkeypatch.setenv("GPUORCH_METRICS__PORT", "9100")
    monkeypatch.setenv("GPUORCH_METRICS__ENABLED", "false")
    monkeypatch.setenv("GPUORCH_PROVIDERS", "{local: {boot_s: 2}}")
    monkeypatch.setenv("GPUORCH_DATABASE_URL", "sqlite:////tmp/other.db")
    monkeypatch.setenv("GPUORCH_LOG_FORMAT", "json")
    monkeypatch.setenv("GPUORCH_CHECKPOINT_DIR", "/not/a/daemon/option")  # other GPUORCH_ names are ignored
    monkeypatch.setenv("GPUORCH_POLL_S", "")  # empty: unset
    c = load_config()
    assert c.metrics == MetricsConfig(enabled=False, port=9100)
    assert c.providers == {"local": {"boot_s": 2}}
    assert c.url == "sqlite:////tmp/other.db" and c.log_format == "json" and c.poll_s == 2.0


@pytest.mark.parametrize("where, text, expected", [
    ("system", "poll_s: -1\n", "{system}: poll_s: must be greater than 0; raise it"),
    ("user", "metrics: {prot: 1}\n", "{user}: metrics.prot: unknown option; known options here: enabled, host, port"),
    ("state", "colour: blue\n", "{state}: colour: unknown option; known options here: home,"),
    ("user", "log_format: xml\n", "{user}: log_format: Input should be 'text' or 'json'"),
    # a key that is not one printable line is quoted, so the message stays one line
    ("user", 'metrics: {"a\\nb": 1, "": 2}\n', "{user}: metrics.'a\\nb': unknown option; known options here: enabled"),
    ("system", "poll_s: [\n", "{system}: line 2: malformed YAML"),
    ("user", "- a list\n", "{user}: the file must hold a mapping of options"),
    ("state", "home: /elsewhere\n", "{state}: home: cannot be set in the state directory's own config"),
])
def test_bad_values_name_the_source_and_the_field(files, where, text, expected):
    paths = {w: str(files(w, "{}\n")) for w in ("system", "user", "state")}
    files(where, text)
    with pytest.raises(UserInputError) as e:
        load_config()
    assert str(e.value).startswith(expected.format(**paths))
    assert "\n" not in str(e.value)


def test_a_bad_environment_value_names_the_variable(monkeypatch):
    monkeypatch.setenv("GPUORCH_METRICS__PORT", "70000")
    with pytest.raises(UserInputError, match=r"^GPUORCH_METRICS__PORT: metrics.port: must be at most 65535; lower it"):
        load_config()


def test_an_explicit_config_must_exist(tmp_path):
    with pytest.raises(UserInputError, match="--config: .*missing.yaml does not exist"):
        load_config(tmp_path / "missing.yaml")


def test_the_example_lists_every_option_with_its_default(_isolated_home):
    text = (REPO / "configs" / "daemon.yaml").read_text()
    data = yaml.safe_load(text)
    assert DaemonConfig.model_validate({**data, "home": _isolated_home}) == DaemonConfig(home=_isolated_home)
    keys = set(DaemonConfig.model_fields) | {f"metrics.{k}" for k in MetricsConfig.model_fields}
    for key in keys:
        name = key.split(".")[-1]
        assert f"\n{name}:" in text or f"\n# {name}:" in text or f"\n  {name}:" in text, key


# -- the CLI: one global --config for every command -------------------------------------------
runner = CliRunner()


@pytest.mark.parametrize("argv", [["status"], ["events"], ["cancel", "1"], ["logs", "1"], ["daemon", "--once"],
                                  ["submit", "job.yaml"]])
def test_every_command_reads_the_global_config(tmp_path, argv):
    bad = tmp_path / "bad.yaml"
    bad.write_text("poll_s: 0\n")
    (tmp_path / "job.yaml").write_text("name: x\nrun: 'true'\nresources: {gpu: T4}\n")
    argv = [str(tmp_path / a) if a == "job.yaml" else a for a in argv]
    r = runner.invoke(app, ["--config", str(bad), *argv])
    assert r.exit_code == 2, r.output
    assert r.output.strip() == f"error: --config {bad}: poll_s: must be greater than 0; raise it"


def test_the_global_config_selects_the_database(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"database_url: sqlite:///{tmp_path / 'other.db'}\n")
    job = tmp_path / "job.yaml"
    job.write_text("name: x\nrun: 'true'\nresources: {gpu: T4}\n")
    assert runner.invoke(app, ["--config", str(cfg), "submit", str(job)]).exit_code == 0
    assert len(json.loads(runner.invoke(app, ["--config", str(cfg), "status", "--json"]).output)["jobs"]) == 1
    assert json.loads(runner.invoke(app, ["status", "--json"]).output)["jobs"] == []  # the default db is untouched
    r = runner.invoke(app, ["status", "--json"], env={"GPUORCH_CONFIG": str(cfg)})
    assert len(json.loads(r.output)["jobs"]) == 1


# -- the quick store location of read-only commands ---------------------------------------------
def test_store_location_is_what_load_gives_when_nothing_else_is_configured(_isolated_home, monkeypatch):
    from gpuorch.ops.config_sources import store_location

    c = load().config
    assert store_location() == (c.home, c.url) == (_isolated_home, f"sqlite:///{_isolated_home / 'state.db'}")
    monkeypatch.setenv("GPUORCH_DATABASE_URL", "postgresql://db/gpuorch")
    monkeypatch.setenv("GPUORCH_SERVER", "")  # empty: unset
    c = load().config
    assert store_location() == (c.home, c.url) == (_isolated_home, "postgresql://db/gpuorch")


@pytest.mark.parametrize("which", ["system", "user", "state"])
def test_store_location_defers_to_load_when_a_file_exists(files, which):
    from gpuorch.ops.config_sources import store_location

    files(which, "")
    assert store_location() is None


def test_store_location_defers_to_load_for_config_and_other_variables(_isolated_home, monkeypatch, tmp_path):
    from gpuorch.ops.config_sources import store_location

    assert store_location(tmp_path / "c.yaml") is None
    monkeypatch.setenv("GPUORCH_POLL_S", "0")
    assert store_location() is None
    r = runner.invoke(app, ["status", "--json"])  # the bad variable still fails status, as before
    assert r.exit_code == 2 and "GPUORCH_POLL_S: poll_s: must be greater than 0; raise it" in r.output
