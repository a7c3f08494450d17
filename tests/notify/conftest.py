from __future__ import annotations

import pytest
from notify_receiver import Receiver, new_secret


@pytest.fixture
def secret() -> str:
    return new_secret()


@pytest.fixture
def receiver(secret):
    r = Receiver(secret)
    yield r
    r.close()
