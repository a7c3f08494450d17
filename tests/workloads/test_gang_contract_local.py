"""The gang contract (``gpuorch.testing.gang_contract``) on the local provider: gangs of
instance directories. It makes no placement group (``groups`` is None: those checks are left
out) and its capacity knob refuses a whole market, not one node (that test is skipped here;
``test_gang.py`` refuses one node of a gang against the fake provider)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuorch.provider.gang import node_token
from gpuorch.provider.localdir import InstanceDir, instance_id_for
from gpuorch.provider.port import TAG_NODE, Instance, InstanceState, Provider, client_token
from gpuorch.testing.gang_contract import GangContract
from gpuorch_local.provider import LocalProvider


class TestLocalGangContract(GangContract):
    @pytest.fixture
    def provider(self, tmp_path: Path) -> LocalProvider:
        return LocalProvider(tmp_path / "local")

    def groups(self, provider: Provider) -> None:
        return None

    def nodes(self, provider: Provider, gang: Instance) -> list[Instance]:
        assert isinstance(provider, LocalProvider)
        token = client_token(gang.job_id or 0, gang.attempt or 0, gang.owner)
        size = int(gang.tags[TAG_NODE].split("-of-")[1])
        dirs = [InstanceDir(provider.instances_dir / instance_id_for(node_token(token, k))) for k in range(size)]
        return [d.read().to_instance() for d in dirs if d.meta_file.exists()]

    def end_node(self, provider: Provider, node: Instance) -> None:
        assert isinstance(provider, LocalProvider)
        InstanceDir(provider.instances_dir / node.id).end(InstanceState.PREEMPTED, "spot-interruption")

    def private_address(self, provider: Provider, node: Instance) -> str:
        return "127.0.0.1"
