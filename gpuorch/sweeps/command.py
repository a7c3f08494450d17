"""``{NAME}`` in a sweep's ``run``: a quoted reference to the trial's environment variable ``NAME``.

A parameter's value is never written into shell text. Each trial gets its parameters as
environment variables (``LR=0.001``), and ``{LR}`` in ``run`` becomes ``"${LR}"`` (outside quotes)
or ``${LR}`` (inside double quotes or an expanding here-document): the shell expands it, and an
expansion's result is never parsed again as syntax, so whatever the value holds (``$(...)``,
quotes, ``;``, newlines) it is one word of data. The scanner below only decides which of the two
spellings keeps the value one exact word; where neither would (single quotes and ``$'...'``,
where nothing expands; a quoted here-document; arithmetic and ``${...}``, where bash evaluates
text as an expression that can run commands) the sweep is refused with one line.

A mistake of the scanner can make a value split into words or stay literal; it cannot make a
value run, because the only text ever inserted is a reference to a variable.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping

from gpuorch.agent.job import INHERITED
from gpuorch.errors import UserInputError
from gpuorch.provider.gang import rendezvous_env

PLACEHOLDER = re.compile(r"(?<![$\w{])\{([A-Za-z_][A-Za-z0-9_]*)\}")
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# Names a parameter may not take: what gpuorch sets or passes through to every job (its value
# would be replaced, or replace the system's), and what a shell, the dynamic loader or a common
# runtime reads to decide what code runs (a sweep value there would change the program).
# Runtime tuning (OMP_*, MKL_*, NCCL_*, ...) stays allowed: sweeping it is a use, and it is data.
SHELL_AND_LOADER = frozenset({
    "IFS", "ENV", "CDPATH", "SHELLOPTS", "POSIXLY_CORRECT", "PS1", "PS2", "PS3", "PS4", "PROMPT_COMMAND",
    "GLOBIGNORE", "FIGNORE", "EXECIGNORE", "FUNCNEST", "HISTFILE", "INPUTRC", "MAIL", "MAILPATH", "OPTIND",
    "OPTARG", "PWD", "OLDPWD", "HOSTNAME", "PPID", "UID", "EUID", "GROUPS", "RANDOM", "SRANDOM", "SECONDS",
    "LINENO", "REPLY", "TIMEFORMAT", "NODE_OPTIONS", "NODE_PATH", "PERL5OPT", "PERL5LIB", "PERLLIB",
    "RUBYOPT", "RUBYLIB", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "CLASSPATH", "GCONV_PATH",
    "HOSTALIASES", "NLSPATH", "LOCPATH", "RESOLV_HOST_CONF", "TMP", "TEMP", "GIT_SSH", "GIT_SSH_COMMAND",
})
RESERVED = INHERITED | SHELL_AND_LOADER | frozenset(rendezvous_env(0, 1, "")) | {"RANK", "LOCAL_RANK"}
RESERVED_PREFIXES = ("GPUORCH_", "BASH", "LD_", "DYLD_", "LC_", "PYTHON", "SSH_", "SUDO_", "HIST", "COMP_")


def check_names(names: Collection[str], template_env: Mapping[str, object] | None) -> None:
    """Each parameter name is a shell identifier no system or template variable has; else one line."""
    for name in names:
        if not IDENTIFIER.fullmatch(name):
            raise UserInputError(f"parameters.{name}: not a variable name; use letters, digits and _, "
                                 "not starting with a digit")
        if name in RESERVED or name.startswith(RESERVED_PREFIXES):
            raise UserInputError(f"parameters.{name}: {name} is a variable the system, shell or runtime sets or "
                                 "reads (the trial gets each parameter as an env var); rename the parameter")
        if template_env and name in template_env:
            raise UserInputError(f"parameters.{name}: also set in job.env, and the trial gets the parameter as "
                                 f"that env var; remove {name} from job.env or rename the parameter")


# How a placeholder is written in each context, or why it is refused there.
WORD, QUOTED = "word", "quoted"  # outside quotes: "${X}"; inside "..." or a here-document: ${X}
LITERAL = "literal"  # escaped (\{X}) or in a comment: left as written
_REFUSED = {
    "'": "is inside 'single quotes', where nothing expands; close the quotes around it: 'text '{P}' more'",
    "$'": "is inside $'...', where nothing expands; close the quotes around it: $'text'{P}",
    "<<'": "is in a quoted here-document (<<'EOF'), where nothing expands; write the delimiter unquoted (<<EOF)",
    "((": "is inside $((...)) or ((...)), where bash evaluates text as an expression that can run commands; "
          "compute in the program, or use {P} outside",
    "${": "is inside ${...}, where the text is a pattern or an expression; use {P} outside it, or $P there",
    "`\"": "is inside `...` within double quotes, where quoting is unspecified; use $(...) instead of backticks",
}
_META = " \t\n;&|()<>"


class _Scan:
    """One pass over ``text``: the context of each placeholder that starts at one of ``starts``."""

    def __init__(self, text: str, starts: set[int]) -> None:
        self.s, self.starts, self.i = text, starts, 0
        self.found: dict[int, str] = {}
        self.forced: str | None = None  # inside $((...)) or ${...}: every placeholder is refused

    def at(self, k: int = 0) -> str:
        return self.s[self.i + k] if self.i + k < len(self.s) else ""

    def mark(self, ctx: str) -> None:
        if self.i in self.starts:
            self.found.setdefault(self.i, self.forced or ctx)

    def command(self, end: str, bq_in_dq: bool = False) -> None:
        """Shell commands until ``end`` (")" of $(...), "`", or "" for the whole text). In backticks
        inside "...", how quotes nest is unspecified (POSIX): every placeholder there is refused."""
        outer = self.forced
        self.forced = outer or ("`\"" if bq_in_dq else None)
        self.commands(end)
        self.forced = outer

    def commands(self, end: str) -> None:
        depth, case, word, pending = 0, 0, "", []
        while self.i < len(self.s):
            c = self.s[self.i]
            if c in _META or c in "'\"`$\\":
                case += (word == "case") - (word == "esac" and case > 0)
                word = ""
            self.mark(WORD)
            if c == "\\":
                self.i += 2  # an escaped "{" starts no placeholder
                continue
            if self.closes(c, end, depth, case):
                self.i += 1
                return
            start_of_word = self.i == 0 or self.s[self.i - 1] in _META
            if c == "'":
                self.quoted("'", "'")
            elif c == '"':
                self.i += 1
                self.double('"')
            elif c == "$":
                self.dollar(in_double=False)
            elif c == "`":
                self.i += 1
                self.command("`")
            elif c == "#" and start_of_word:
                self.comment()
            elif c == "(" and self.at(1) == "(" and start_of_word:
                self.i += 2
                self.arithmetic()
            elif c == "<" and self.at(1) == "<" and self.at(2) != "<":
                self.i += 2
                pending.append(self.heredoc_word())
            elif c == "\n" and pending:
                self.i += 1
                for delim, strip, quoted in pending:
                    self.heredoc_body(delim, strip, quoted)
                pending = []
            else:
                depth += (c == "(") - (c == ")" and depth > 0)
                word += c if c not in _META else ""
                self.i += 1

    @staticmethod
    def closes(c: str, end: str, depth: int, case: int) -> bool:
        """``c`` ends the commands: the "`" of backticks, or the ")" of $(...) outside any (...) and case."""
        return (c == end and end == "`") or (c == ")" and end == ")" and depth == 0 and case == 0)

    def comment(self) -> None:
        """From "#" to the end of the line: a placeholder there is left as written."""
        while self.i < len(self.s) and self.s[self.i] != "\n":
            self.mark(LITERAL)
            self.i += 1

    def quoted(self, opener: str, ctx: str) -> None:
        """'...' or $'...' (``opener`` already at i): nothing expands; in $'...' a backslash escapes."""
        self.i += len(opener)
        while self.i < len(self.s) and self.s[self.i] != "'":
            self.mark(ctx)
            self.i += 2 if ctx == "$'" and self.s[self.i] == "\\" else 1
        self.i += 1

    def double(self, end: str) -> None:
        """Inside "..." (``end`` '"'), or a here-document's body (``end`` "": to the text's end)."""
        while self.i < len(self.s):
            c = self.s[self.i]
            self.mark(QUOTED)
            if c == "\\":
                self.i += 2
            elif end and c == end:
                self.i += 1
                return
            elif c == "$":
                self.dollar(in_double=True)
            elif c == "`":
                self.i += 1
                self.command("`", bq_in_dq=True)
            else:
                self.i += 1

    def dollar(self, in_double: bool) -> None:
        nxt = self.at(1)
        if nxt == "(" and self.at(2) == "(":
            self.i += 3
            self.arithmetic()
        elif nxt == "(":
            self.i += 2
            self.command(")")
        elif nxt in "{[":
            self.i += 2
            self.forced_scan("${" if nxt == "{" else "((", "}" if nxt == "{" else "]", in_double)
        elif nxt == "'" and not in_double:
            self.i += 1
            self.quoted("'", "$'")
        else:
            self.i += 1  # $NAME, $1, $#...: the next character is read as usual

    def arithmetic(self) -> None:
        self.forced_scan("((", ")", in_double=False)

    def forced_scan(self, why: str, close: str, in_double: bool) -> None:
        """${...}, $[...], $((...)), ((...)): to the matching close; every placeholder in it refused."""
        outer, self.forced = self.forced, self.forced or why
        opener, depth = {"}": "{", "]": "[", ")": "("}[close], 0
        while self.i < len(self.s):
            c = self.s[self.i]
            self.mark(WORD)
            if c == "\\":
                self.i += 2
            elif c == "'" and not in_double:
                self.quoted("'", "'")
            elif c == '"':
                self.i += 1
                self.double('"')
            elif c == "$":
                self.dollar(in_double)
            elif c == "`":
                self.i += 1
                self.command("`")
            elif c == close and depth == 0:
                self.i += 1 + (close == ")" and self.at(1) == ")")  # arithmetic ends at "))"
                break
            else:
                depth += (c == opener) - (c == close)
                self.i += 1
        self.forced = outer

    def heredoc_word(self) -> tuple[str, bool, bool]:
        """After ``<<``: the delimiter (quotes removed), whether ``<<-``, whether it was quoted."""
        strip = self.at() == "-"
        self.i += strip
        while self.at() in (" ", "\t"):
            self.i += 1
        begin = self.i
        while self.i < len(self.s) and self.s[self.i] not in _META:
            if self.s[self.i] in "'\"":
                q = self.s[self.i]
                self.i = self.s.find(q, self.i + 1) + 1 or len(self.s)
            else:
                self.i += 1
        raw = self.s[begin:self.i]
        return re.sub(r"""['"\\]""", "", raw), strip, any(q in raw for q in "'\"\\")

    def heredoc_body(self, delim: str, strip: bool, quoted: bool) -> None:
        """The body's lines up to the delimiter line: expanding like "..." unless the word was quoted."""
        begin = self.i
        while self.i < len(self.s):
            nl = self.s.find("\n", self.i)
            stop = len(self.s) if nl < 0 else nl
            line = self.s[self.i:stop]
            if (line.lstrip("\t") if strip else line) == delim:
                break
            self.i = stop + 1
        end = min(self.i, len(self.s))
        body = _Scan(self.s[:end], self.starts)
        body.i, body.forced = begin, self.forced or ("<<'" if quoted else None)
        body.double("")
        self.found = {**body.found, **self.found}
        nl = self.s.find("\n", end)
        self.i = len(self.s) if nl < 0 else nl + 1  # past the delimiter line


def substitute(command: str, names: Collection[str]) -> str:
    """``command`` with each ``{NAME}`` (not ``${NAME}``, ``{{NAME}}`` or ``\\{NAME}``) of a parameter
    in ``names`` replaced by a quoted reference to the environment variable ``NAME``; UserInputError
    naming ``job.run`` where no reference would expand to exactly the value (see ``_REFUSED``)."""
    matches = [m for m in PLACEHOLDER.finditer(command) if m.group(1) in names]
    if not matches:
        return command
    scan = _Scan(command, {m.start() for m in matches})
    scan.command("")
    out, last = [], 0
    for m in matches:
        name, ctx = m.group(1), scan.found.get(m.start(), LITERAL)
        if ctx in _REFUSED:
            why = _REFUSED[ctx].replace("{P}", "{" + name + "}").replace("$P", "$" + name)
            raise UserInputError(f"job.run: {{{name}}} {why} (the parameter is the env var {name})")
        ref = "" if ctx == LITERAL else f"${{{name}}}" if ctx == QUOTED else f'"${{{name}}}"'
        out += [command[last:m.start()], ref or m.group(0)]
        last = m.end()
    return "".join(out) + command[last:]
