"""Every numeric option of the CLI is finite and in range, by rule: each int or float option
declares both bounds (typer then refuses NaN and the infinities too, as out of range), so a new
option cannot forget them; and a refusal is one line naming the option, exit code 2."""

from __future__ import annotations

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from gpuorch.cli import app

BAD = ["nan", "NaN", "inf", "-inf", "Infinity", "1e400", "-1e400", "1e20", "-1e20", "true", "0x10", ""]


def _numeric_options():
    def walk(command, path):
        subs = getattr(command, "commands", None)
        if subs:
            for name, sub in sorted(subs.items()):
                yield from walk(sub, (*path, name))
            return
        for p in command.params:
            kind = getattr(getattr(p, "type_descriptor", None), "annotation", None)
            if kind in (int, float):
                yield path, command, p
    return list(walk(get_command(app), ()))


OPTIONS = _numeric_options()


def test_the_cli_has_numeric_options_to_check():
    assert len(OPTIONS) > 20


@pytest.mark.parametrize(("path", "command", "param"), OPTIONS,
                         ids=[" ".join(path) + " " + param.opts[0] for path, _, param in OPTIONS])
def test_every_numeric_option_is_bounded_and_refuses_non_finite_values(path, command, param):
    assert param.min is not None and param.max is not None, f"{param.opts[0]}: declare min= and max="
    ctx = command.make_context(path[-1], [], resilient_parsing=True)
    for bad in BAD:
        with pytest.raises(Exception) as caught:
            param.process_value(ctx, bad)
        message = caught.value.format_message()
        assert param.opts[0] in message and "\n" not in message.strip(), message


@pytest.mark.parametrize("argv", [["events", "--limit", "nan"], ["estimate", "--params", "7B", "--efficiency", "inf"],
                                  ["offers", "--top", "1e20"], ["serve", "--port", "-1"], ["nosuch"]])
def test_a_usage_error_is_one_line_with_exit_code_2(argv):
    r = CliRunner().invoke(app, argv)
    assert r.exit_code == 2, r.output
    assert r.output.startswith("error: ") and r.output.count("\n") == 1, r.output
    assert "--help" in r.output
