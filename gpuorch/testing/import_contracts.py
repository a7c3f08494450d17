"""Import-linter contract types the stock ones lack: "these modules import only that list of
modules" (``allowlist``) and "a cloud SDK is imported only by its own adapter" (``sdk_owners``).

``forbidden`` says what may not be imported; the adapter kit rule (DESIGN.md 5: adapters import
only a small, named kit from the core) is an allow-list of modules, each named on its own: a
package named in it is its ``__init__`` only, never the modules under it (a module added to
``gpuorch.provider`` is not in the kit until it is listed). Registered in ``.importlinter`` as
``allowlist``; a third-party adapter can check itself the same way::

    [importlinter:contract:kit]
    name = my adapter imports only the core's kit
    type = allowlist
    source_modules = gpuorch_mycloud
    root = gpuorch
    allowed_modules = gpuorch.provider gpuorch.errors ...

Only direct imports count (a kit module may use any part of the core). Importing the root
package module itself (``import gpuorch``: its version and location) is allowed. Requires
import-linter (a dev dependency); nothing but ``lint-imports`` imports this module.
"""

from __future__ import annotations

import grimp
from importlinter import Contract, ContractCheck, fields, output


def _within(module: str, packages: set[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


class AllowListContract(Contract):
    """Every direct import from ``source_modules`` (and descendants) into ``root`` lands on one of
    ``allowed_modules`` (that very module). Broken: one line per import, with its line."""

    type_name = "allowlist"

    source_modules = fields.ListField(subfield=fields.ModuleField())
    root = fields.ModuleField()
    allowed_modules = fields.ListField(subfield=fields.ModuleField())

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        sources = {m.name for m in self.source_modules}  # type: ignore[attr-defined]
        allowed = {m.name for m in self.allowed_modules}  # type: ignore[attr-defined]
        root = self.root.name  # type: ignore[attr-defined]
        bad: list[str] = []
        for importer in sorted(m for m in graph.modules if _within(m, sources)):
            for imported in sorted(graph.find_modules_directly_imported_by(importer)):
                if imported == root or not _within(imported, {root}) or imported in allowed:
                    continue
                for d in graph.get_import_details(importer=importer, imported=imported):
                    bad.append(f"{importer} -> {imported} (l.{d['line_number']}: {d['line_contents']})")
        return ContractCheck(kept=not bad, metadata={"bad": bad})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for line in check.metadata["bad"]:
            output.print_error(f"- {line}", bold=False)
        output.new_line()
        output.print("Import it through the kit, move it into the kit, or move the code into the adapter.")


class SdkOwnersContract(Contract):
    """Each external package in ``owners`` (lines ``package: adapter``) is imported, among
    ``source_modules`` (the adapters, and their descendants), by its owner only. Broken: one line
    per import, naming the owner. A package not listed may be imported by any adapter."""

    type_name = "sdk_owners"

    source_modules = fields.ListField(subfield=fields.ModuleField())
    owners = fields.ListField(subfield=fields.StringField())

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        sources = {m.name for m in self.source_modules}  # type: ignore[attr-defined]
        owner_of = dict(_owner(line) for line in self.owners)  # type: ignore[attr-defined]
        bad: list[str] = []
        for importer in sorted(m for m in graph.modules if _within(m, sources)):
            mine = importer.split(".")[0]
            for imported in sorted(graph.find_modules_directly_imported_by(importer)):
                owner = owner_of.get(imported.split(".")[0])
                if owner is None or owner == mine:
                    continue
                for d in graph.get_import_details(importer=importer, imported=imported):
                    bad.append(f"{importer} -> {imported} (l.{d['line_number']}: {d['line_contents']}), "
                               f"the SDK of {owner}")
        return ContractCheck(kept=not bad, metadata={"bad": bad})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for line in check.metadata["bad"]:
            output.print_error(f"- {line}", bold=False)
        output.new_line()
        output.print("Talk to that cloud through its own adapter, or move the code there.")


def _owner(line: str) -> tuple[str, str]:
    """``"boto3: gpuorch_aws"`` -> ("boto3", "gpuorch_aws")."""
    package, sep, owner = line.partition(":")
    if not sep or not package.strip() or not owner.strip():
        raise ValueError(f"sdk_owners: {line!r} is not 'package: adapter'")
    return package.strip(), owner.strip()
