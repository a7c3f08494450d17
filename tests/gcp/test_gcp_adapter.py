"""The GCP adapter beyond the contract: names and labels, request bodies, config errors, error
translation (through the real SDK against the fake), retries, preemption as GCE shows it."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta

import pytest
from fake_gce import FakeGce

from gpuorch.errors import (
    AuthError,
    NoCapacityError,
    NotFoundError,
    PermanentError,
    QuotaError,
    TransientError,
    UserInputError,
)
from gpuorch.provider.port import InstanceState, LaunchRequest, Offer, client_token, managed_tags
from gpuorch_gcp import GcpProvider
from gpuorch_gcp.config import parse_options
from gpuorch_gcp.errors import classify, operation_error
from gpuorch_gcp.names import (
    NAME,
    instance_name,
    label_filter,
    labels_from_tags,
    request_id,
    tags_from_labels,
    tags_from_name,
)
from gpuorch_gcp.parse import state_of
from gpuorch_gcp.requests import instance_body

pytestmark = pytest.mark.gcp
OWNER = "c0ffee000001"


def offer(instance_type: str = "g2-standard-4", zone: str = "us-central1-a", gpu: str = "L4", count: int = 1) -> Offer:
    return Offer(provider="gcp", region=zone.rsplit("-", 1)[0], zone=zone, instance_type=instance_type, gpu=gpu,
                 gpu_count=count, gpu_memory_gib=24, price_per_hour=1.0, spot_price_per_hour=0.3)


def request(o: Offer | None = None, job: int = 7, attempt: int = 1, spot: bool = True, **kw) -> LaunchRequest:
    return LaunchRequest(job_id=job, attempt=attempt, offer=o or offer(), spot=spot, owner=OWNER, **kw)


# -- names and labels ----------------------------------------------------------------------
def test_instance_name_is_the_token_when_gce_accepts_it():
    token = client_token(12, 3, OWNER)
    assert instance_name(token) == "gpuorch-c0ffee000001-12-3" and NAME.fullmatch(instance_name(token))


@pytest.mark.parametrize("token", [
    client_token(10**30, 10**30, OWNER),  # hashed by the core: fits already
    "gpuorch-" + "9" * 60,  # 68 characters
    "gpuorch-UPPER-1-1",
    "gpuorch-1-1-",
])
def test_instance_name_is_always_a_valid_gce_name_and_deterministic(token):
    name = instance_name(token)
    assert NAME.fullmatch(name) and len(name) <= 63
    assert instance_name(token) == name


def test_distinct_tokens_get_distinct_names_and_request_ids():
    tokens = [client_token(j, a, o) for j in (1, 2) for a in (1, 2) for o in ("", OWNER, "c0ffee000002")]
    assert len({instance_name(t) for t in tokens}) == len(tokens)
    assert len({request_id(t) for t in tokens}) == len(tokens)
    assert request_id(tokens[0]) == request_id(tokens[0])


def test_tags_round_trip_through_labels():
    tags = managed_tags(12, 3, OWNER)
    labels = labels_from_tags(tags)
    assert labels == {"gpuorch-managed": "true", "gpuorch-job": "12", "gpuorch-attempt": "3", "gpuorch-owner": OWNER}
    assert tags_from_labels(labels) == tags
    assert tags_from_labels({"team": "ml"}) == {"team": "ml"}


def test_a_tag_value_gce_would_refuse_is_an_error_not_a_silent_change():
    with pytest.raises(ValueError, match="cannot be a GCE label value"):
        labels_from_tags({"gpuorch:owner": "Mixed.Case"})


def test_tags_from_a_token_name():
    assert tags_from_name("gpuorch-c0ffee000001-12-3") == managed_tags(12, 3, OWNER)
    assert tags_from_name("gpuorch-12-3") == managed_tags(12, 3)
    assert tags_from_name("someone-elses-vm") == {}


def test_label_filter():
    assert label_filter({"gpuorch-managed": "true"}) == 'labels.gpuorch-managed = "true"'


# -- request bodies ------------------------------------------------------------------------
def test_spot_body_is_deleted_on_reclaim_and_terminated_on_maintenance():
    body = instance_body(request(spot=True), zone="us-central1-a", image="img")
    assert body["scheduling"] == {"on_host_maintenance": "TERMINATE", "provisioning_model": "SPOT",
                                  "instance_termination_action": "DELETE", "automatic_restart": False}
    assert body["name"] == "gpuorch-c0ffee000001-7-1"
    assert body["labels"]["gpuorch-job"] == "7" and body["labels"]["gpuorch-owner"] == OWNER
    assert body["machine_type"] == "zones/us-central1-a/machineTypes/g2-standard-4"
    assert "guest_accelerators" not in body  # g2 bundles its L4


def test_on_demand_body_and_attached_gpus_for_n1():
    body = instance_body(request(offer("n1-standard-8", gpu="T4", count=2), spot=False), zone="us-central1-a",
                         image="img", network="global/networks/ml", subnetwork="regions/us-central1/subnetworks/a")
    assert body["scheduling"]["provisioning_model"] == "STANDARD"
    assert body["scheduling"]["on_host_maintenance"] == "TERMINATE"
    assert body["guest_accelerators"] == [
        {"accelerator_type": "zones/us-central1-a/acceleratorTypes/nvidia-tesla-t4", "accelerator_count": 2}]
    nic = body["network_interfaces"][0]
    assert nic["network"] == "global/networks/ml" and nic["access_configs"][0]["type_"] == "ONE_TO_ONE_NAT"


def test_body_carries_cloud_config_and_a_lifetime_backstop():
    body = instance_body(request(ssh_public_key="ssh-ed25519 AAAA me", max_lifetime_s=3600), zone="us-central1-a",
                         image="img")
    guest, item = body["metadata"]["items"]
    assert guest == {"key": "enable-guest-attributes", "value": "TRUE"}  # the guest can publish its host keys
    assert item["key"] == "user-data" and item["value"].startswith("#cloud-config")
    assert "ssh-ed25519 AAAA me" in item["value"] and "+60" in item["value"]


def test_a_gpu_gce_cannot_attach_is_a_value_error():
    with pytest.raises(ValueError, match="cannot be attached"):
        instance_body(request(offer("n1-standard-8", gpu="H100")), zone="us-central1-a", image="img")


# -- config --------------------------------------------------------------------------------
@pytest.mark.parametrize("options, field", [
    ({"zones": ["us-central1-a"]}, "providers.gcp.project: is required"),
    ({"project": "Bad_Project", "zones": ["us-central1-a"]}, "providers.gcp.project:"),
    ({"project": "my-project-1"}, "providers.gcp.regions:"),
    ({"project": "my-project-1", "zones": ["us-central1"]}, "providers.gcp.zones:"),
    ({"project": "my-project-1", "regions": ["us-central1-a"]}, "providers.gcp.regions:"),
    ({"project": "my-project-1", "regions": ["us-central1"], "ssh_user": "Root"}, "providers.gcp.ssh_user:"),
    ({"project": "my-project-1", "regions": ["us-central1"], "zone": "x"}, "providers.gcp.zone: unknown option"),
])
def test_bad_config_is_one_line_naming_the_field(options, field):
    with pytest.raises(UserInputError) as e:
        parse_options(options)
    assert str(e.value).startswith(field) and "\n" not in str(e.value)


def test_from_config_rejects_zones_without_offers(fake: FakeGce, tmp_path):
    with pytest.raises(UserInputError, match="providers.gcp.zones: the catalog has no GCP offer"):
        GcpProvider.from_config({"project": fake.project, "zones": ["antarctica-south1-a"], "endpoint": fake.url},
                                tmp_path)


def test_from_config_checks_the_project_answers(fake: FakeGce, tmp_path):
    p = GcpProvider.from_config({"project": fake.project, "regions": ["us-central1"], "endpoint": fake.url}, tmp_path)
    assert p.offers() and {o.region for o in p.offers()} == {"us-central1"}
    p.close()
    fake.fail_http("GET", "/instances$", 403, "forbidden")
    with pytest.raises(UserInputError, match=r"providers.gcp: .*HTTP 403.*credentials google-auth finds"):
        GcpProvider.from_config({"project": fake.project, "regions": ["us-central1"], "endpoint": fake.url}, tmp_path)


def test_offers_are_the_catalogs_gcp_rows_in_the_configured_zones(make_provider):
    offers = make_provider(zones=["us-central1-a"], regions=["europe-west4"]).offers()
    assert offers and {o.provider for o in offers} == {"gcp"}
    assert {o.zone for o in offers} <= {"us-central1-a"} | {o.zone for o in offers if o.region == "europe-west4"}
    assert any(o.instance_type.startswith("g2-") for o in offers)


def test_offline_offers_respect_the_configured_zones(tmp_path):
    from gpuorch.registry import offline_offers

    offers = offline_offers({"gcp": {"project": "my-project-1", "zones": ["us-central1-a"]}}, tmp_path)
    assert offers and {(o.provider, o.zone) for o in offers} == {("gcp", "us-central1-a")}


# -- errors --------------------------------------------------------------------------------
@pytest.mark.parametrize("codes, status, cls", [
    (["ZONE_RESOURCE_POOL_EXHAUSTED"], 503, NoCapacityError),
    (["ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"], None, NoCapacityError),
    (["STOCKOUT"], None, NoCapacityError),
    (["QUOTA_EXCEEDED"], 403, QuotaError),
    (["quotaExceeded"], 403, QuotaError),
    (["rateLimitExceeded"], 403, TransientError),
    ([], 429, TransientError),
    ([], 503, TransientError),
    (["forbidden"], 403, AuthError),
    ([], 401, AuthError),
    (["notFound"], 404, NotFoundError),
    (["invalid"], 400, PermanentError),
])
def test_classify(codes, status, cls):
    assert classify(codes, status) is cls


def test_operation_error_names_the_code():
    quota = {"code": "QUOTA_EXCEEDED", "message": "Quota 'GPUS_ALL_REGIONS' exceeded"}
    err = operation_error({"error": {"errors": [quota]}, "http_error_status_code": 403}, "insert x")
    assert isinstance(err, QuotaError) and err.code == "QUOTA_EXCEEDED" and "GPUS_ALL_REGIONS" in str(err)
    assert operation_error({"status": "DONE"}, "insert x") is None
    # A server error in a finished insert replays for the same requestId: the next attempt retries.
    internal = operation_error({"error": {"errors": [{"code": "INTERNAL_ERROR"}]}, "http_error_status_code": 500}, "x")
    assert isinstance(internal, NoCapacityError)


@pytest.mark.parametrize("code, cls", [
    ("ZONE_RESOURCE_POOL_EXHAUSTED", NoCapacityError), ("ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", NoCapacityError),
    ("STOCKOUT", NoCapacityError), ("QUOTA_EXCEEDED", QuotaError), ("INVALID_FIELD_VALUE", PermanentError),
])
def test_a_refused_insert_operation_is_translated_and_creates_nothing(provider, fake: FakeGce, code, cls):
    fake.refuse(code, http_status=400 if code == "INVALID_FIELD_VALUE" else 503)
    with pytest.raises(cls) as e:
        provider.launch(request())
    assert e.value.code == code
    assert not fake.instances and provider.list_managed() == []


def test_throttling_and_5xx_are_retried_then_succeed(provider, fake: FakeGce, sleeps):
    fake.fail_http("POST", "/instances$", 503, times=2)
    fake.fail_http("GET", "/instances/", 429, "rateLimitExceeded", times=1)
    inst = provider.launch(request())
    assert inst.state.alive and len(sleeps) == 3 and all(s >= 0 for s in sleeps)
    assert len(fake.instances) == 1


def test_persistent_5xx_gives_up_with_a_transient_error(provider, fake: FakeGce, sleeps):
    fake.fail_http("POST", "/instances$", 500, times=100)
    with pytest.raises(TransientError, match="gave up after 5 attempts"):
        provider.launch(request())
    assert len(sleeps) == 4


@pytest.mark.parametrize("status", [401, 403])
def test_auth_failures_are_not_retried(provider, fake: FakeGce, sleeps, status):
    fake.fail_http("POST", "/instances$", status, "forbidden", times=100)
    with pytest.raises(AuthError, match="credentials google-auth finds"):
        provider.launch(request())
    assert sleeps == []


def test_a_quota_403_is_a_quota_error(provider, fake: FakeGce, sleeps):
    fake.fail_http("POST", "/instances$", 403, "quotaExceeded")
    with pytest.raises(QuotaError):
        provider.launch(request())
    assert sleeps == []


def test_an_existing_name_409_returns_that_instance(provider, fake: FakeGce):
    req = request()
    fake.add_instance("us-central1-a", instance_name(req.client_token), labels_from_tags(req.tags))
    inst = provider.launch(req)  # no requestId on record: GCE answers 409
    assert inst.id == f"us-central1-a/{instance_name(req.client_token)}" and inst.job_id == 7
    assert len(fake.instances) == 1


def test_the_insert_carries_the_tokens_request_id(provider, fake: FakeGce):
    req = request()
    first = provider.launch(req)
    fake.instances.clear()  # gone (deleted) behind our back; the repeat must not create another
    again = provider.launch(req)
    assert again.id == first.id and again.state == InstanceState.TERMINATED and not fake.instances


def test_terminate_is_quiet_for_unknown_and_foreign_ids(provider):
    provider.terminate("us-central1-a/nothing-here")
    provider.terminate("not-an-id")
    provider.terminate("asia-east1-a/outside-the-config")
    with pytest.raises(NotFoundError):
        provider.get("not-an-id")


# -- preemption ----------------------------------------------------------------------------
def test_state_of_a_reclaim_in_progress_then_done():
    from datetime import UTC, datetime

    now = datetime(2024, 5, 1, 10, 0, 10, tzinfo=UTC)
    op = {"operation_type": "compute.instances.preempted", "status": "RUNNING",
          "insert_time": "2024-05-01T03:00:00.000-07:00"}
    assert state_of("STOPPING", op, now) == (InstanceState.RUNNING, datetime(2024, 5, 1, 10, 0, 30, tzinfo=UTC))
    assert state_of("TERMINATED", {**op, "status": "DONE"}, now) == (InstanceState.PREEMPTED, None)
    assert state_of("STOPPING", None, now) == (InstanceState.STOPPING, None)
    assert state_of("TERMINATED", None, now) == (InstanceState.TERMINATED, None)
    with pytest.raises(ValueError):
        state_of("EXPLODED", None, now)


def test_a_reclaimed_spot_vm_reads_preempted_in_list_managed_after_gce_deleted_it(fake: FakeGce, make_provider):
    provider = make_provider()
    inst = provider.launch(request())
    fake.preempt("us-central1-a", inst.id.split("/")[1])
    noticed = provider.get(inst.id)
    assert noticed.state == InstanceState.RUNNING
    assert noticed.preemption_deadline is not None
    assert noticed.preemption_deadline - fake.now() <= timedelta(seconds=30)
    fake.advance(31)
    assert not fake.instances  # deleted, as instanceTerminationAction DELETE does
    fresh = make_provider()  # a restarted daemon: nothing remembered, the name tells the attempt
    (listed,) = fresh.list_managed()
    assert (listed.id, listed.state, listed.job_id, listed.attempt, listed.owner) == (
        inst.id, InstanceState.PREEMPTED, 7, 1, OWNER)
    assert provider.get(inst.id).instance_type == "g2-standard-4"  # remembered by the one that saw it


def test_a_vm_we_deleted_is_not_reported_preempted(provider, fake: FakeGce):
    inst = provider.launch(request())
    provider.terminate(inst.id)
    with pytest.raises(NotFoundError):
        provider.get(inst.id)
    assert provider.list_managed() == []


def test_runner_reads_gces_notice(make_provider, tmp_path):
    provider = make_provider(home=tmp_path)
    inst = provider.launch(request())
    runner = provider.runner(provider.get(inst.id))
    assert runner.notice.kind == "gcp"
    assert runner.connection.host == inst.host


def test_importing_the_adapter_does_not_import_the_sdk():
    code = "import sys, gpuorch_gcp, gpuorch.cli; print(any(m.startswith('google.cloud') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
