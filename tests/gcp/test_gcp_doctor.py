"""The GCP adapter's doctor self-check against the fake GCE: where the credentials came from,
and each listing permission, refusals injected as GCE answers them (HTTP 403)."""

from __future__ import annotations

import pytest

from gpuorch.provider.port import SupportsDoctor

pytestmark = pytest.mark.gcp


def test_every_listing_permission_granted(make_provider, fake):
    p = make_provider(zones=["us-central1-a"])
    assert isinstance(p, SupportsDoctor)
    [f] = p.doctor()
    assert f.status == "ok", f
    assert f.message.startswith("credentials from google.auth.credentials.AnonymousCredentials (test endpoint")
    assert "compute.instances.list in us-central1-a" in f.message
    assert "compute.zoneOperations.list in us-central1-a" in f.message


def test_a_refused_listing_fails_naming_the_permission(make_provider, fake):
    p = make_provider(zones=["us-central1-a"])
    fake.fail_http("GET", "/zones/us-central1-a/operations$", 403, "forbidden")
    found = p.doctor()
    [failed] = [f for f in found if f.status == "fail"]
    assert "compute.zoneOperations.list in us-central1-a refused" in failed.message
    assert "roles/compute.instanceAdmin.v1" in (failed.fix or "")


def test_no_credentials_in_the_chain(make_provider, fake, monkeypatch):
    p = make_provider(zones=["us-central1-a"])
    monkeypatch.setattr(p._gce, "credentials", None)  # as without a test endpoint: the standard chain
    [f] = p.doctor()  # the conftest empties google-auth's environment: nothing to find
    assert f.status == "fail" and "found no credentials" in f.message and "GOOGLE_APPLICATION_CREDENTIALS" in f.fix
