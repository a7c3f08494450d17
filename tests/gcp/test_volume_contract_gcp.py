"""The volume contract suite against ``GcpProvider``'s persistent disks on the fake GCE (real SDK client)."""

from __future__ import annotations

import pytest

from gpuorch.testing import VolumeContract
from gpuorch_gcp import GcpProvider

pytestmark = pytest.mark.gcp


class TestGcpVolumeContract(VolumeContract):
    missing_volume_id = "us-central1-a/gpuorch-c0ffee000009-9-vol"

    @pytest.fixture
    def provider(self, make_provider) -> GcpProvider:
        return make_provider()
