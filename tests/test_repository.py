"""The repository as a fresh clone sees it: no committed link may point outside it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def tracked_symlinks() -> list[Path]:
    out = subprocess.run(["git", "-C", str(REPO), "ls-files", "-s"], capture_output=True, text=True, check=True)
    # mode 120000 is a symbolic link in git's index
    return [REPO / line.split("\t", 1)[1] for line in out.stdout.splitlines() if line.startswith("120000 ")]


def test_no_tracked_link_leaves_the_repository() -> None:
    bad = []
    for link in tracked_symlinks():
        target = Path(os.path.normpath(link.parent / os.readlink(link)))
        if not target.is_relative_to(REPO):
            bad.append(f"{link.relative_to(REPO)} -> {os.readlink(link)}")
    assert not bad, "links that point outside the repository: " + ", ".join(bad)


def test_no_module_of_the_core_or_an_adapter_is_over_400_lines() -> None:
    # docs/development.md: a module over 400 lines owns more than one thing; split it by what it owns
    long = [f"{p.relative_to(REPO)} ({n} lines)" for root in ("gpuorch", "providers")
            for p in sorted((REPO / root).rglob("*.py")) if (n := len(p.read_text().splitlines())) > 400]
    assert not long, "modules over 400 lines: " + ", ".join(long)
