"""The configuration a host with no file and no variable gets, built without validation
(``ops.config.defaults``, the CLI's quick path), is the one ``load`` validates."""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest

from gpuorch.ops import config
from gpuorch.ops.config_sources import load
from gpuorch.policy.recovery import DEFAULT_STRATEGY

cli_app = importlib.import_module("gpuorch.cli.app")  # the module (``gpuorch.cli.app`` is also the typer app)


def test_defaults_equal_the_validated_configuration(tmp_path: Path) -> None:
    quick = config.defaults(tmp_path)
    full = load(None, {"GPUORCH_HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
                       "CONFIGURATION_DIRECTORY": str(tmp_path / "etc")}).config
    assert quick == full
    assert quick.model_dump() == full.model_dump()
    assert quick.model_fields_set == full.model_fields_set == {"home"}
    for name in ("metrics", "api", "notifications"):
        assert getattr(quick, name).model_fields_set == getattr(full, name).model_fields_set == set()
    assert quick.url == full.url and quick.budget_policy() == full.budget_policy()


def test_the_default_strategy_is_the_policies_own() -> None:
    assert config.DEFAULT_STRATEGY == DEFAULT_STRATEGY


@pytest.mark.parametrize("variables", [{}, {"GPUORCH_POLL_S": "0.5"}, {"GPUORCH_DATABASE_URL": "sqlite:////x/s.db"}])
def test_cli_config_takes_the_quick_path_only_with_nothing_configured(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variables: dict[str, str]) -> None:
    for k in [k for k in os.environ if k.startswith("GPUORCH_")]:  # the suite's own (GPUORCH_CHAOS_SEED) too
        monkeypatch.delenv(k)
    monkeypatch.setenv("GPUORCH_HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("CONFIGURATION_DIRECTORY", str(tmp_path / "etc"))
    for k, v in variables.items():
        monkeypatch.setenv(k, v)
    calls: list[object] = []
    monkeypatch.setattr("gpuorch.ops.config_sources.load_config", lambda path: calls.append(path) or "loaded")
    monkeypatch.setattr(cli_app, "_config", [])
    monkeypatch.setattr(cli_app, "_config_path", None)  # an earlier CliRunner invocation's --config stays set
    got = cli_app.cli_config()
    assert (got == config.defaults(tmp_path)) == (not variables)
    assert calls == ([] if not variables else [None])
    assert cli_app.cli_config() is got  # read once per invocation


def test_a_bad_config_file_still_fails_the_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from gpuorch.cli import app

    monkeypatch.setenv("GPUORCH_HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("CONFIGURATION_DIRECTORY", str(tmp_path / "etc"))
    result = CliRunner().invoke(app, ["offers", "--json"])
    assert result.exit_code == 0, result.output
    (tmp_path / "config.yaml").write_text("poll_s: -1\n")
    result = CliRunner().invoke(app, ["offers", "--json"])
    assert result.exit_code == 2
    assert "poll_s" in result.output
