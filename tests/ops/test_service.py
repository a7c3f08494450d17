"""The systemd unit: one template, valid for systemd, with what the control host needs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuorch.cli import app
from gpuorch.ops.systemd_unit import render_unit, this_executable

REPO = Path(__file__).resolve().parents[2]


def directives(unit: str) -> dict[str, str]:
    out = {}
    for line in unit.splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            out[key] = value
    return out


def test_the_repository_unit_is_the_rendered_template():
    assert (REPO / "systemd" / "gpuorch.service").read_text() == render_unit()


def test_the_unit_asks_for_what_the_issue_lists():
    d = directives(render_unit())
    assert d["Type"] == "notify" and d["NotifyAccess"] == "main"
    assert int(d["WatchdogSec"]) > 0 and d["Restart"] == "on-failure"
    assert d["User"] == "gpuorch" and d["StateDirectory"] == "gpuorch" and d["ConfigurationDirectory"] == "gpuorch"
    for key in ("NoNewPrivileges", "ProtectHome", "PrivateTmp"):
        assert d[key] == "true", key
    assert d["ProtectSystem"] == "strict"
    assert d["KillMode"] == "process"  # local jobs outlive a restart, as cloud ones do
    assert int(d["TimeoutStopSec"]) > 30  # above the default drain_timeout_s


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_systemd_accepts_the_unit(tmp_path):
    unit = tmp_path / "gpuorch.service"
    unit.write_text(render_unit(this_executable().split()[0]))
    r = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    ours = [line for line in r.stderr.splitlines() if "gpuorch.service" in line]
    assert ours == [], ours  # no unknown keys, no bad values


def test_install_service_writes_the_unit_and_prints_the_commands(tmp_path):
    r = CliRunner().invoke(app, ["install-service", "--unit-dir", str(tmp_path), "--user", "gpo"])
    assert r.exit_code == 0, r.output
    unit = (tmp_path / "gpuorch.service").read_text()
    assert directives(unit)["ExecStart"] == f"{this_executable()} daemon" and directives(unit)["User"] == "gpo"
    assert "systemctl enable --now gpuorch" in r.output and "useradd --system" in r.output


def test_install_service_to_stdout():
    r = CliRunner().invoke(app, ["install-service", "--stdout"])
    assert r.exit_code == 0 and r.output == render_unit(this_executable())
