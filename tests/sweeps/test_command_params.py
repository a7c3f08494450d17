"""Issue 31, item 2: a sweep parameter's value never becomes shell syntax.

``{X}`` in ``run`` becomes a quoted reference to the trial's environment variable ``X``. The
property test builds commands that print ``{X}`` from generated quoting contexts (unquoted,
"...", $(...), backticks, here-documents, case inside $(...), comments, escapes, nested), runs
each with the real /bin/sh and /bin/bash under the trial's environment, and checks that the
command printed exactly what the context makes of the value, and that no injected ``touch`` ran.
Contexts where no reference could expand to the value ('...', $'...', a quoted here-document,
arithmetic, ${...}, backticks inside "...") must be refused, in one line naming job.run.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuorch.errors import UserInputError
from gpuorch.sweeps.command import check_names, substitute
from gpuorch.sweeps.spec import parse_sweep

NOW = datetime(2026, 1, 1, tzinfo=UTC)
SHELLS = ["/bin/sh", "/bin/bash"]
EXAMPLES = int(os.environ.get("GPUORCH_PROPERTY_EXAMPLES", "300"))  # 4000 pass too, in ~30 s
MARK = "@MARK@"  # replaced by the marker file's path in a value


@dataclass(frozen=True)
class Ctx:
    """Shell text with ``{X}`` somewhere; what it prints for a value; whether it must be refused."""

    text: str
    out: Callable[[str], str]
    refused: bool = False
    has: bool = True  # holds a placeholder to substitute (a refusing wrapper refuses only then)


def _word(lit: str) -> str:  # a literal in single quotes: no quote inside
    return "'" + lit + "'"


LIT = st.text(alphabet=" -=:,.+@%^~#()!*?[]<>;&|", max_size=6)  # no word character: "a{X}" is no placeholder
DQ_LIT = st.text(alphabet=" -=:,.+@%^~#()!*?[]<>;&|'", max_size=6)  # "'" and "#" are plain inside "..."


def unquoted(inner: st.SearchStrategy[Ctx]) -> st.SearchStrategy[Ctx]:
    """Contexts that are one shell word (outside quotes), built around ``inner`` words."""
    sub = "printf '%s.' "  # a trailing "." keeps $(...) from eating the value's trailing newlines
    return st.one_of(
        st.builds(lambda c, a, b: Ctx(f"{_word(a)}{c.text}{_word(b)}", lambda v, c=c, a=a, b=b: a + c.out(v) + b,
                                      c.refused, c.has), inner, LIT, LIT),
        st.builds(lambda c: Ctx(f'"$({sub}{c.text})"', lambda v, c=c: c.out(v) + ".", c.refused, c.has), inner),
        st.builds(lambda c: Ctx(f'"`{sub}{c.text}`"', lambda v, c=c: c.out(v) + ".", c.has, c.has),
                  inner.filter(lambda c: "`" not in c.text)),  # backticks in "...": refused (nested: not sh)
        st.builds(lambda c: Ctx(f'"$(case a in a) {sub}{c.text};; esac)"', lambda v, c=c: c.out(v) + ".",
                                c.refused, c.has), inner),
        st.builds(lambda c, a: Ctx(f'"{a}"{c.text}', lambda v, c=c, a=a: a + c.out(v), c.refused, c.has),
                  inner, DQ_LIT),
        # here-documents; the delimiter is unique by length, as a nested one's text is shorter
        st.builds(lambda c: Ctx(f'"$(cat <<E{len(c.text)}\n{c.text}.\nE{len(c.text)}\n)"',
                                lambda v, c=c: c.out(v) + ".", c.refused, c.has), in_double(inner)),
        st.builds(lambda t: Ctx(f"\"$(cat <<'Q'\n{t}.\nQ\n)\"", lambda v, t=t: t + ".", "{X}" in t.replace("${X}", ""),
                                "{X}" in t.replace("${X}", "")),
                  st.sampled_from(["{X}", "${X}", "a {X} $(b)", "$X"])),  # quoted: nothing expands
        st.builds(lambda c: Ctx(f'"$(cat <<-E{len(c.text)}\n\t{c.text}.\n\tE{len(c.text)}\n)"',
                                lambda v, c=c: c.out(v) + ".", c.refused, c.has), in_double(inner)),
    )


def in_double(inner: st.SearchStrategy[Ctx]) -> st.SearchStrategy[Ctx]:
    """Text for inside "..." (or an expanding here-document), around ``inner`` words."""
    return st.one_of(
        st.just(Ctx("{X}", lambda v: v)),
        st.just(Ctx("${X}", lambda v: v, has=False)),
        st.just(Ctx("\\{X}", lambda v: "\\{X}", has=False)),  # an escaped brace is no placeholder
        st.builds(lambda c: Ctx(f"$(printf '%s.' {c.text})", lambda v, c=c: c.out(v) + ".", c.refused, c.has), inner),
        st.builds(lambda a, b: Ctx(f"{a}{{X}}{b}", lambda v, a=a, b=b: a + v + b), DQ_LIT, DQ_LIT),
    )


BASE = st.one_of(
    st.just(Ctx("{X}", lambda v: v)),
    st.just(Ctx('"${X}"', lambda v: v, has=False)),
    st.just(Ctx("\\{X}", lambda v: "{X}", has=False)),  # escaped: left as written, the shell prints {X}
    st.just(Ctx("{{X}}", lambda v: "{{X}}", has=False)),
    st.just(Ctx("'{X}'", lambda v: v, True)),
    st.just(Ctx("$'{X}'", lambda v: v, True)),
    st.just(Ctx("$((1+{X}))", lambda v: v, True)),
    st.just(Ctx("${X:-{X}}", lambda v: v, True)),
)
CONTEXTS = st.recursive(BASE, lambda inner: st.one_of(unquoted(inner),
                                                      in_double(inner).map(lambda c: Ctx(f'"{c.text}"', c.out,
                                                                                         c.refused, c.has))),
                        max_leaves=4)
COMMENTS = st.sampled_from(["", "# it's {X} \"$(\n", ": 'a' # {X} `\n", "# {X}\n: <<'Z'\n{Y}\nZ\n"])
FRAGMENTS = [f"$(touch {MARK})", f"`touch {MARK}`", f";touch {MARK}", f"'; touch {MARK}; '", f'"; touch {MARK}"',
             f"\ntouch {MARK}\n", "$X", "${X}", "\\", "'", '"', "*", "?", "[a]", "~", "#", " ", "\t", "\n",
             "EOF", "%s", "%b\\n", "!", "$((1))", "{X}", "a[$(touch " + MARK + ")]", "-n", "$'x'"]
VALUES = st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=3).filter(lambda t: "\0" not in t),
                  max_size=6).map("".join)


def run(shell: str, command: str, value: str) -> tuple[int, str, bytes]:
    """Exit code, stdout exactly as written (bytes, no newline translation), stderr."""
    r = subprocess.run([shell, "-c", command], env={"X": value, "PATH": "/usr/bin:/bin"}, capture_output=True,
                       timeout=60)
    return r.returncode, r.stdout.decode("utf-8", "surrogateescape"), r.stderr


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(ctx=CONTEXTS, comment=COMMENTS, value=VALUES)
def test_a_parameter_prints_exactly_its_value_in_any_context_and_never_runs(ctx, comment, value):
    with tempfile.TemporaryDirectory() as tmp:
        marker = Path(tmp) / "MARK"
        value = value.replace(MARK, str(marker))
        command = f"{comment}printf '%s|' {ctx.text} # {{X}} '\n"
        try:
            cmd = substitute(command, {"X"})
        except UserInputError as e:
            assert ctx.refused, f"refused {command!r}: {e}"
            assert str(e).startswith("job.run: {X} ") and "\n" not in str(e)
            return
        assert not ctx.refused, f"accepted {command!r} as {cmd!r}"
        for shell in SHELLS:
            code, out, err = run(shell, cmd, value)
            assert code == 0, (shell, cmd, err)
            assert out == ctx.out(value) + "|", (shell, cmd)
            assert not marker.exists(), (shell, cmd)


@pytest.mark.parametrize("run_line, why", [
    ("echo '{X}'", "'single quotes'"),
    ("echo $'{X}'", "$'...'"),
    ("cat <<'EOF'\n{X}\nEOF", "quoted here-document"),
    ('cat <<"EOF"\n{X}\nEOF', "quoted here-document"),
    ("cat <<\\EOF\n{X}\nEOF", "quoted here-document"),
    ("echo $(( {X} + 1 ))", "$((...))"),
    ("(( {X} > 1 )) && echo big", "$((...))"),
    ("echo ${A:-{X}}", "${...}"),
    ('echo "`echo {X}`"', "backticks"),
])
def test_contexts_where_no_reference_would_expand_are_refused_in_one_line(run_line, why):
    with pytest.raises(UserInputError) as e:
        parse_sweep({"name": "s", "job": {"run": run_line}, "parameters": {"X": ["a"]}}, "s.yaml", NOW)
    msg = str(e.value)
    assert msg.startswith("s.yaml: job.run: {X} ") and why in msg and "\n" not in msg


@pytest.mark.parametrize("run_line, expected", [
    ("python train.py --lr {X}", 'python train.py --lr "${X}"'),
    ('echo "lr={X}; seed=$S"', 'echo "lr=${X}; seed=$S"'),
    ("echo $X ${X} {{X}} \\{X} {Y} # {X}", "echo $X ${X} {{X}} \\{X} {Y} # {X}"),
    ("# don't\necho {X}", '# don\'t\necho "${X}"'),
    ("cat <<EOF\nlr {X}\nEOF\necho {X}", 'cat <<EOF\nlr ${X}\nEOF\necho "${X}"'),
])
def test_the_reference_is_spelled_for_its_context(run_line, expected):
    assert substitute(run_line, {"X"}) == expected


@pytest.mark.parametrize("name", ["PATH", "IFS", "BASH_ENV", "LD_PRELOAD", "PYTHONSTARTUP", "HOME", "NODE_RANK",
                                  "CUDA_VISIBLE_DEVICES", "LC_ALL", "GPUORCH_X", "PS4", "ENV"])
def test_a_parameter_named_like_a_system_variable_is_refused(name):
    with pytest.raises(UserInputError) as e:
        check_names([name], None)
    assert str(e.value).startswith(f"parameters.{name}: ") and "rename" in str(e.value)


def test_a_parameter_also_in_the_template_env_is_refused_and_others_are_allowed():
    sweep = {"name": "s", "job": {"run": "echo {LR}", "env": {"LR": "1"}}, "parameters": {"LR": [1]}}
    with pytest.raises(UserInputError, match=r"^s\.yaml: parameters\.LR: also set in job\.env"):
        parse_sweep(sweep, "s.yaml", NOW)
    _, trials = parse_sweep({**sweep, "parameters": {"LR": [1], "OMP_NUM_THREADS": [2]}, "job": {
        "run": "echo {LR}", "env": {"OTHER": "x"}}}, "s.yaml", NOW)
    (params, job), = trials
    assert job.env == {"OTHER": "x", "LR": "1", "OMP_NUM_THREADS": "2"} and job.run == 'echo "${LR}"'
