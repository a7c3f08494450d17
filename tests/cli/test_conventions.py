"""CLI conventions: --version, shell completion, an example in every command's --help, tables
that keep full values when piped or --wide, NO_COLOR."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import typer
from rich.table import Table
from typer.testing import CliRunner

import gpuorch
from gpuorch.cli import app
from gpuorch.cli.output import plain, show

runner = CliRunner()


def _commands(cmd, path=()):
    subs = getattr(cmd, "commands", None)
    if subs is None:
        yield " ".join(path), cmd
        return
    for name, sub in subs.items():
        yield from _commands(sub, (*path, name))


ALL = list(_commands(typer.main.get_command(app)))


def test_version():
    r = runner.invoke(app, ["--version"])
    assert r.exit_code == 0 and r.stdout == f"gpuorch {gpuorch.__version__}\n"


def test_shell_completion_is_on(monkeypatch):
    # Typer may take the shell from the process tree, not the argument: under make and xdist that
    # found none ("Shell  not supported"). The detection is the thin helper replaced here.
    import typer.completion

    monkeypatch.setattr(typer.completion, "_get_shell_name", lambda: "bash", raising=False)
    r = runner.invoke(app, ["--show-completion", "bash"])
    assert r.exit_code == 0 and "_gpuorch_completion" in r.stdout and "complete" in r.stdout, (r.output, r.exception)
    assert "--install-completion" in runner.invoke(app, ["--help"]).stdout


def test_the_installed_script_completes_command_names(tmp_path):
    env = {**os.environ, "_GPUORCH_COMPLETE": "complete_bash", "COMP_WORDS": "gpuorch sw", "COMP_CWORD": "1"}
    code = "import sys; sys.argv = ['gpuorch']; from gpuorch.console import main; main()"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert "sweep" in r.stdout.split(), (r.stdout, r.stderr)


@pytest.mark.parametrize("name, cmd", ALL, ids=[n for n, _ in ALL])
def test_every_command_has_an_example_in_its_help(name, cmd):
    r = runner.invoke(app, [*name.split(), "--help"])
    assert r.exit_code == 0 and re.search(r"Example: (sudo )?(\S+=\S+ )?gpuorch ", " ".join(r.stdout.split())), name


def test_piped_tables_keep_every_value_in_full():
    assert plain(["NAME", "COST"], [["a", "$0.012345"], ["bb", "$1"]]) == "NAME  COST\na     $0.012345\nbb    $1\n"


def test_status_piped_or_wide_prints_plain_columns(capsys, tmp_path):
    p = tmp_path / "job.yaml"
    p.write_text("name: a-job-name-well-over-twenty-characters\nrun: 'true'\nresources: {gpu: T4}\n")
    assert runner.invoke(app, ["submit", str(p)]).exit_code == 0
    for argv in (["status"], ["status", "--wide"]):
        out = runner.invoke(app, argv).stdout
        assert "…" not in out and "│" not in out and "\x1b[" not in out
        header, row = out.splitlines()[:2]
        assert header.split() == ["ID", "NAME", "KIND", "STATUS", "RUNS", "PREEMPT", "WHERE", "CHECKPOINT", "COST",
                                  "DEADLINE", "NOTE"]
        assert "a-job-name-well-over-twenty-characters" in row and "$0.0000" in row


def test_no_color_turns_rich_colour_off(monkeypatch):
    from rich.console import Console

    monkeypatch.setenv("NO_COLOR", "1")
    assert Console(force_terminal=True).no_color is True  # what show() and the help screens use
    t = Table("A")
    t.add_row("[red]x[/]")
    show(t, wide=True)  # the plain path prints no escape codes at all


READING = ["status", "events", "logs", "sweep status", "cost", "doctor", "estimate", "offers", "plan",
           "simulate policy"]


@pytest.mark.parametrize("name", READING)
def test_every_reading_command_has_json(name):
    assert "--json" in runner.invoke(app, [*name.split(), "--help"]).stdout


@pytest.mark.parametrize("name", ["status", "sweep status", "cost"])
def test_table_commands_have_wide(name):
    assert "--wide" in runner.invoke(app, [*name.split(), "--help"]).stdout
