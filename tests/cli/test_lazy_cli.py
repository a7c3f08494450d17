"""Lazy command registration of the console script (gpuorch.console, gpuorch.cli.main)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gpuorch.cli import COMMAND_MODULES, COMMANDS, app, command_module


def _registered() -> dict[str, str]:
    """Each top-level command or group of the fully registered app -> the module defining it."""
    found = {}
    for c in app.registered_commands:
        name = c.name or c.callback.__name__.replace("_", "-")  # type: ignore[union-attr]
        found[name] = c.callback.__module__  # type: ignore[union-attr]
    for g in app.registered_groups:
        modules = {c.callback.__module__ for c in g.typer_instance.registered_commands}  # type: ignore[union-attr]
        assert len(modules) == 1, g.name
        found[g.name] = modules.pop()  # type: ignore[index]
    return found


def test_the_command_map_matches_what_the_modules_register():
    assert {k: f"gpuorch.cli.{v}" for k, v in COMMANDS.items()} == _registered()
    assert set(COMMANDS.values()) == set(COMMAND_MODULES)


@pytest.mark.parametrize("argv, module", [
    (["status", "--json"], "jobs"),
    (["--config", "x.yaml", "offers", "--json"], "planning"),
    (["--config=x.yaml", "--server", "http://h", "--token", "t", "status"], "jobs"),
    (["sweep", "status", "s"], "sweeps"),
    (["install-service"], "ops"),
    ([], None),
    (["--help"], None),
    (["--help", "status"], None),
    (["--config"], None),
    (["no-such-command"], None),
])
def test_the_module_is_found_after_the_global_options(argv, module):
    assert command_module(argv) == module


def _run(*args: str, env_home, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    code = ("import sys; sys.argv = ['gpuorch', *sys.argv[1:]]\n"
            "from gpuorch.console import main\n"
            "try:\n    main()\n"
            "except SystemExit as e:\n    code = e.code\n"
            "else:\n    code = 0\n"
            "print(sorted(m for m in sys.modules if m.startswith('gpuorch.cli.') or m in ('sqlalchemy', 'sqlmodel')))\n"
            "print(sorted(m for m in sys.modules\n"
            "             if m in ('yaml', 'gpuorch.ops.config', 'gpuorch.provider.port', 'numpy')))\n"
            "sys.exit(code)")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env={"GPUORCH_HOME": str(env_home), "PATH": "/usr/bin:/bin", **(extra or {})})


def test_the_script_imports_only_the_module_of_the_command(tmp_path):
    # A price list is read as rows: no configuration, no typed offers. (By default `offers` ranks
    # the configured providers, which needs the configuration and the provider port.)
    r = _run("offers", "--price-list", "--json", env_home=tmp_path)
    assert r.returncode == 0, r.stderr
    modules = "['gpuorch.cli.app', 'gpuorch.cli.planning', 'gpuorch.cli.planning_view']"
    assert r.stdout.splitlines()[-2:] == [modules, "[]"]


def test_status_json_reads_the_store_without_yaml_config_model_or_orm(tmp_path):
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "CONFIGURATION_DIRECTORY": str(tmp_path / "etc")}
    assert _run("status", "--json", env_home=tmp_path, extra=env).returncode == 0  # creates the empty store
    r = _run("status", "--json", env_home=tmp_path, extra=env)
    assert r.returncode == 0, r.stderr
    *out, modules, others = r.stdout.splitlines()
    assert json.loads("\n".join(out))["jobs"] == []
    assert (modules, others) == ("['gpuorch.cli.app', 'gpuorch.cli.jobs', 'gpuorch.cli.output']", "[]")
    (tmp_path / "config.yaml").write_text("poll_s: 1\n")  # a config file: read and validated as before
    r = _run("status", "--json", env_home=tmp_path, extra=env)
    assert r.returncode == 0 and r.stdout.splitlines()[-1] == "['gpuorch.ops.config', 'yaml']"


def test_help_lists_every_command(tmp_path):
    r = _run("--help", env_home=tmp_path)
    assert r.returncode == 0, r.stderr
    for name in COMMANDS:
        assert name in r.stdout
