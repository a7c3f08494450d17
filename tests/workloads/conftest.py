from __future__ import annotations

import pytest
from podman_image import build_image, unavailable


@pytest.fixture(scope="session")
def podman_image(tmp_path_factory) -> str:
    why = unavailable()
    if why:
        pytest.skip(why)
    return build_image(tmp_path_factory.mktemp("image"))
