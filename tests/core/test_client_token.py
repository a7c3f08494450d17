"""The port's launch idempotency token: unique per (installation, job, attempt), cloud-sized."""

from __future__ import annotations

import re

from gpuorch.provider.port import CLIENT_TOKEN_MAX, LaunchRequest, client_token
from gpuorch.testing.fake_provider import default_offers


def test_the_token_names_the_owner_job_and_attempt() -> None:
    assert client_token(7, 2, "0123456789ab") == "gpuorch-0123456789ab-7-2"
    assert client_token(7, 2) == "gpuorch-7-2"  # no owner: tests and tools only
    req = LaunchRequest(job_id=7, attempt=2, offer=default_offers()[0], spot=True, owner="0123456789ab")
    assert req.client_token == "gpuorch-0123456789ab-7-2" and req.tags["gpuorch:owner"] == "0123456789ab"


def test_two_installations_never_share_a_token() -> None:
    # job 1 attempt 1 exists in every database; a re-initialised one gets a new installation id
    tokens = {client_token(1, 1, owner) for owner in ("0123456789ab", "ba9876543210", "", "Inst-A", "inst a")}
    assert len(tokens) == 5
    assert client_token(1, 11, "ab") != client_token(11, 1, "ab")  # the parts stay apart


def test_tokens_fit_every_cloud_whatever_the_owner() -> None:
    for owner in ("", "0123456789ab", "x" * 500, "ünïcode/owner with spaces"):
        for job, attempt in ((1, 1), (10**18, 10**6), (2**63 - 1, 2**31 - 1)):
            token = client_token(job, attempt, owner)
            assert len(token) <= CLIENT_TOKEN_MAX and re.fullmatch(r"gpuorch-[a-z0-9-]+", token), token
    assert client_token(2**63 - 1, 2**31 - 1, "0123456789ab") != client_token(2**63 - 1, 2**31 - 2, "0123456789ab")
