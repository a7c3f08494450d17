"""The adapter kit (gpuorch.provider): the base class's defaults, one check_offer, lazy names,
and the layering it exists for (no adapter imports another; local and sim share localdir)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import gpuorch.provider as kit
from gpuorch.errors import PermanentError, UserInputError
from gpuorch.provider import Instance, LaunchRequest, Offer, Provider
from gpuorch.provider.catalog import load_offers

PROVIDERS = Path(__file__).resolve().parents[2] / "providers"


class Minimal(Provider):
    name = "aws"  # borrows AWS's shipped rows for the catalog_offers default

    def offers(self) -> list[Offer]:
        return []

    def launch(self, request: LaunchRequest) -> Instance:
        self.check_offer(request.offer)
        raise AssertionError("not reached in these tests")

    def get(self, instance_id: str) -> Instance:
        raise NotImplementedError

    def list_managed(self) -> list[Instance]:
        return []

    def terminate(self, instance_id: str) -> None:
        pass


def test_from_config_default_builds_without_options_and_names_an_unknown_one(tmp_path):
    assert isinstance(Minimal.from_config({}, tmp_path), Minimal)
    with pytest.raises(UserInputError, match=r"^providers\.aws\.region: unknown option; aws takes none$"):
        Minimal.from_config({"region": "x", "zone": "y"}, tmp_path)


def test_catalog_offers_default_is_the_providers_shipped_rows(tmp_path):
    offers = Minimal.catalog_offers({}, tmp_path)
    assert offers and offers == [o for o in load_offers() if o.provider == "aws"]


def test_check_offer_refuses_another_providers_offer():
    gcp = next(o for o in load_offers() if o.provider == "gcp")
    req = LaunchRequest(job_id=1, attempt=1, offer=gcp, spot=False)
    with pytest.raises(PermanentError, match="offer of provider 'gcp' sent to aws") as e:
        Minimal().launch(req)
    assert e.value.code == "InvalidOffer"


def test_every_kit_name_resolves():
    for name in kit.__all__:
        assert getattr(kit, name) is not None, name
    with pytest.raises(AttributeError):
        kit.no_such_name  # noqa: B018


def test_the_catalog_submodule_is_light():
    code = ("import sys, gpuorch.provider.catalog, gpuorch.catalog.registry as r; r.catalogs()\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'tenacity', 'paramiko', 'boto3')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def _imported_tops(path: Path) -> set[str]:
    tops = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            tops |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            tops.add(node.module.split(".")[0])
    return tops


@pytest.mark.parametrize("adapter", sorted(p.name for p in PROVIDERS.glob("gpuorch_*") if p.is_dir()))
def test_no_adapter_imports_another(adapter):
    for path in (PROVIDERS / adapter).rglob("*.py"):
        others = {t for t in _imported_tops(path) if t.startswith("gpuorch_") and t != adapter}
        assert not others, f"{path.relative_to(PROVIDERS)} imports {sorted(others)}; use the kit (gpuorch.provider)"


def test_local_and_sim_share_the_instance_directory_kit():
    import gpuorch_local.provider as local
    import gpuorch_sim.provider as sim
    from gpuorch.provider import localdir

    assert local.InstanceDir is sim.InstanceDir is localdir.InstanceDir
    assert local.LocalRunner is sim.LocalRunner is localdir.LocalRunner
    assert localdir.instance_id_for("gpuorch-7-2") == "local-7-2"
    assert localdir.instance_id_for("gpuorch-7-2", "sim") == "sim-7-2"
