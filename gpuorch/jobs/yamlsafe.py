"""YAML as users may write it to gpuorch: UTF-8, bounded in size and depth, unique keys, and no
aliases or explicit tags. One loader for job specs, sweep files and the daemon configuration.

PyYAML's ``safe_load`` lets the last of two equal keys win silently, expands aliases (a few
hundred bytes can become megabytes: "billion laughs"), and recurses once per nesting level (a
deep file ends in RecursionError). Each of those is refused here in one line that says where.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.events import AliasEvent, CollectionStartEvent, ScalarEvent

from gpuorch.errors import UserInputError

MAX_BYTES = 1 << 20  # a job spec, sweep or config file; the largest sensible one is a few KiB
MAX_DEPTH = 32  # nesting levels of mappings and lists


def _where(mark: Any) -> str:
    return f" line {mark.line + 1}" if mark is not None else ""


class _Refused(yaml.YAMLError):
    def __init__(self, problem: str, mark: Any) -> None:
        super().__init__(problem)
        self.problem, self.problem_mark = problem, mark


class StrictLoader(yaml.SafeLoader):
    """``SafeLoader`` that refuses aliases, explicit tags, duplicate keys and deep nesting."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, AliasEvent):
            raise _Refused(f"alias *{event.anchor} is not allowed; write the value out", event.start_mark)
        explicit = (isinstance(event, ScalarEvent) and not any(event.implicit)) or (
            isinstance(event, CollectionStartEvent) and not event.implicit)
        if explicit and event.tag not in (None, "!"):
            raise _Refused(f"tag {event.tag} is not allowed; remove it (quote the value for a string)",
                           event.start_mark)
        if isinstance(event, CollectionStartEvent):
            self._depth += 1
            if self._depth > MAX_DEPTH:
                raise _Refused(f"nested deeper than {MAX_DEPTH} levels; flatten it", event.start_mark)
        try:
            return super().compose_node(parent, index)
        finally:
            if isinstance(event, CollectionStartEvent):
                self._depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                dup = key in seen
            except TypeError:  # a list or mapping as a key: the base class reports it
                break
            if dup:
                raise _Refused(f"key {key!r} is given twice; keep one", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def loads(text: str, source: str) -> Any:
    """Parse ``text`` strictly; UserInputError naming ``source`` and the line."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise UserInputError(f"{source}: too large (over {MAX_BYTES} bytes); keep it to the spec itself")
    try:
        return yaml.load(text, Loader=StrictLoader)  # a SafeLoader subclass
    except _Refused as e:
        raise UserInputError(f"{source}:{_where(e.problem_mark)}: {e.problem}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        problem = str(getattr(e, "problem", None) or e).replace("\n", " ")
        raise UserInputError(f"{source}:{_where(mark)}: malformed YAML ({problem}); fix the syntax") from None
    except RecursionError:
        raise UserInputError(f"{source}: nested too deeply; flatten it") from None


def load_file(path: str | Path, what: str = "the file") -> Any:
    """Read ``path`` as UTF-8 (bounded) and parse it strictly; UserInputError for each failure."""
    p = Path(path)
    try:
        with p.open("rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except OSError as e:
        raise UserInputError(f"{p}: cannot read {what} ({e.strerror}); check the path") from None
    if len(raw) > MAX_BYTES:
        raise UserInputError(f"{p}: too large (over {MAX_BYTES} bytes); keep it to the spec itself")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserInputError(f"{p}: not UTF-8 text (byte {e.start}); save it as UTF-8") from None
    return loads(text, str(p))
