"""The volume contract suite against ``AwsProvider``'s EBS volumes on in-process moto."""

from __future__ import annotations

from typing import Any

import pytest

from gpuorch.testing import VolumeContract
from gpuorch_aws import AwsProvider

pytestmark = pytest.mark.aws


class TestAwsVolumeContract(VolumeContract):
    @pytest.fixture
    def provider(self, make_provider: Any) -> AwsProvider:
        return make_provider()
