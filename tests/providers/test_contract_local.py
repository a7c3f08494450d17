"""The provider contract suite against the local provider (real processes, real time)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from gpuorch.clock import utcnow
from gpuorch.provider.localdir.instances import InstanceDir, Meta
from gpuorch.provider.port import InstanceState, Offer, Provider
from gpuorch.testing import ProviderContract
from gpuorch_local import LocalProvider


class TestLocalProviderContract(ProviderContract):
    boot_timeout_s = 5.0
    end_timeout_s = 5.0
    notice_s = 0.5
    missing_instance_id = "local-0-0"

    @pytest.fixture
    def provider(self, tmp_path: Path) -> LocalProvider:
        # A short boot, so the suite also sees instances in PENDING.
        return LocalProvider(tmp_path / "local", boot_s=0.2)

    def create_unmanaged(self, provider: Provider, offer: Offer) -> str:
        """A directory whose record lacks the managed tag: as if someone else made it."""
        assert isinstance(provider, LocalProvider)
        now = utcnow()
        inst = InstanceDir(provider.instances_dir / "local-foreign")
        inst.create(Meta(id=inst.id, client_token="someone-else", tags={"owner": "someone-else"}, offer=offer,
                         spot=False, state=InstanceState.RUNNING, created_at=now, ready_at=now - timedelta(1)))
        return inst.id
