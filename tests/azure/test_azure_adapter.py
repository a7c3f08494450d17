"""The Azure adapter beyond the contract: names and tags, request bodies, options, error
translation through the real SDK client, evictions, cleanup, addresses, the runner, lazy imports.
Everything runs against the fake ARM (``fake_arm.py``) on 127.0.0.1; nothing is mocked."""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path

import azure_test_catalog
import pytest
import yaml
from azure_helpers import StaticToken, options, subnet
from fake_arm import FakeArm

from gpuorch.errors import (
    AuthError,
    NoCapacityError,
    NotFoundError,
    PermanentError,
    QuotaError,
    TransientError,
    UserInputError,
)
from gpuorch.provider.port import (
    TAG_JOB,
    TAG_MANAGED,
    InstanceState,
    LaunchRequest,
    Offer,
    client_token,
    managed_tags,
)
from gpuorch_azure import AzureProvider
from gpuorch_azure.calls import Exists
from gpuorch_azure.config import parse_options
from gpuorch_azure.errors import classify
from gpuorch_azure.names import azure_tags, gpuorch_tags, tag_name, vm_name
from gpuorch_azure.parse import EVICTED_DEALLOCATED, POWERED_OFF, vm_state
from gpuorch_azure.requests import vm_body

pytestmark = pytest.mark.azure
OWNER = "c0ffee000001"


def t4(region: str = "eastus", spot: bool = True) -> Offer:
    return Offer(provider="azure", region=region, zone=region, instance_type="Standard_NC4as_T4_v3", gpu="T4",
                 gpu_count=1, gpu_memory_gib=15, price_per_hour=0.526, spot_price_per_hour=0.06 if spot else None)


def req(job: int = 7, attempt: int = 1, spot: bool = True, region: str = "eastus", **kw) -> LaunchRequest:
    return LaunchRequest(job_id=job, attempt=attempt, offer=t4(region), spot=spot, owner=OWNER, **kw)


# -- names and tags ---------------------------------------------------------------------------
def test_vm_name_is_the_client_token_when_azure_accepts_it():
    token = client_token(12, 3, OWNER)
    assert vm_name(token) == token == "gpuorch-c0ffee000001-12-3"
    assert vm_name(token) == vm_name(token)  # deterministic: a repeated launch finds the VM


def test_vm_name_hashes_a_token_azure_would_refuse():
    for token in ("gpuorch_x-1", "Gpuorch-UPPER-1".upper() + "_", "a" * 65, "ends-with-hyphen-"):
        name = vm_name(token)
        assert len(name) <= 64 and name.startswith("gpuorch-") and name.replace("-", "").isalnum()
        assert name != vm_name(token + "x")


def test_core_tag_names_pass_unchanged_and_forbidden_characters_are_translated():
    tags = managed_tags(5, 2, OWNER)
    assert azure_tags(tags) == tags  # ':' is allowed in Azure tag names
    assert tag_name("team/a<b>%c&d\\e?f") == "team_a_b__c_d_e_f"
    back = gpuorch_tags(azure_tags({"x/y": "1", **tags}), {"x/y": "1"})
    assert back == {"x/y": "1", **tags}
    with pytest.raises(ValueError, match="256"):
        azure_tags({"k": "v" * 257})
    with pytest.raises(ValueError, match="both become"):
        azure_tags({"a/b": "1", "a?b": "2"})


# -- request bodies ---------------------------------------------------------------------------
def _body(spot: bool = True, **kw) -> dict:
    return vm_body(req(spot=spot), name="gpuorch-c0ffee000001-7-1", subnet_id="/subscriptions/s/resourceGroups/r/"
                   "providers/Microsoft.Network/virtualNetworks/v/subnets/d", image="pub:offer:sku:latest",
                   admin_user="azureuser", ssh_public_key="ssh-ed25519 AAAA key", user_data="#cloud-config\n{}\n", **kw)


def test_spot_body_is_spot_with_delete_eviction_and_no_price_cap():
    p = _body()["properties"]
    assert (p["priority"], p["evictionPolicy"], p["billingProfile"]) == ("Spot", "Delete", {"maxPrice": -1})
    assert _body(eviction_policy="Deallocate")["properties"]["evictionPolicy"] == "Deallocate"
    on_demand = _body(spot=False)["properties"]
    assert on_demand["priority"] == "Regular" and "evictionPolicy" not in on_demand


def test_body_tags_everything_it_creates_and_deletes_it_with_the_vm():
    b = _body()
    tags = managed_tags(7, 1, OWNER)
    assert b["tags"] == tags and b["location"] == "eastus"
    p = b["properties"]
    assert p["storageProfile"]["osDisk"]["deleteOption"] == "Delete"
    nic = p["networkProfile"]["networkInterfaceConfigurations"][0]
    assert nic["tags"] == tags and nic["properties"]["deleteOption"] == "Delete"
    ip = nic["properties"]["ipConfigurations"][0]["properties"]["publicIPAddressConfiguration"]
    assert ip["tags"] == tags and ip["properties"]["deleteOption"] == "Delete"
    assert "publicIPAddressConfiguration" not in _body(public_ip=False)["properties"]["networkProfile"][
        "networkInterfaceConfigurations"][0]["properties"]["ipConfigurations"][0]["properties"]
    os_profile = p["osProfile"]
    assert os_profile["linuxConfiguration"]["disablePasswordAuthentication"] is True
    assert os_profile["linuxConfiguration"]["ssh"]["publicKeys"] == [
        {"path": "/home/azureuser/.ssh/authorized_keys", "keyData": "ssh-ed25519 AAAA key"}]
    assert base64.b64decode(os_profile["customData"]).decode().startswith("#cloud-config")
    with pytest.raises(ValueError, match="one OpenSSH public key line"):
        vm_body(req(), name="n", subnet_id="s", image="a:b:c:d", admin_user="u", ssh_public_key="a\nb")


# -- options ----------------------------------------------------------------------------------
SUBNET = "/subscriptions/x/resourceGroups/r/providers/Microsoft.Network/virtualNetworks/v/subnets/s"


@pytest.mark.parametrize("change, field", [
    ({"subscription_id": None}, "providers.azure.subscription_id: is required"),
    ({"subscription_id": "my-sub"}, "providers.azure.subscription_id: 'my-sub' is not a subscription id"),
    ({"regions": ["East US"]}, "providers.azure.regions"),
    ({"subnet_id": {"eastus": SUBNET}}, "providers.azure.subnet_id.westus2: no subnet for region westus2"),
    ({"subnet_id": {"eastus": "subnet-1", "westus2": "subnet-2"}}, "providers.azure.subnet_id.eastus: 'subnet-1'"),
    ({"admin_user": "root"}, "providers.azure.admin_user"),
    ({"image": "ubuntu"}, "providers.azure.image"),
    ({"eviction_policy": "Stop"}, "providers.azure.eviction_policy"),
    ({"endpoint": "http://127.0.0.1:1"}, "providers.azure.endpoint: must be an https:// URL"),
    ({"region": "eastus"}, "providers.azure.region: unknown option"),
])
def test_a_bad_option_fails_with_one_line_naming_the_field(arm: FakeArm, change: dict, field: str):
    opts = {k: v for k, v in {**options(arm), **change}.items() if v is not None}
    with pytest.raises(UserInputError) as e:
        parse_options(opts)
    assert str(e.value).startswith(field) and "\n" not in str(e.value)


def test_from_config_checks_the_resource_group_and_the_credential_at_start(arm: FakeArm, tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch):
    import gpuorch_azure.calls as calls

    real = calls.Arm.__init__

    def with_token(self, opts, *, credential=None, **kw):  # DefaultAzureCredential would look for a login
        real(self, opts, credential=StaticToken(arm.token), **kw)

    monkeypatch.setattr(calls.Arm, "__init__", with_token)
    azure_test_catalog.write(tmp_path)  # prices as a refresh leaves them
    AzureProvider.from_config(options(arm), tmp_path).close()
    with pytest.raises(UserInputError, match=r"^providers\.azure\.resource_group: .*ResourceGroupNotFound"):
        AzureProvider.from_config(options(arm, resource_group="nope"), tmp_path)
    arm.reject_tokens = True
    with pytest.raises(UserInputError, match=r"^providers\.azure: .*InvalidAuthenticationToken"):
        AzureProvider.from_config(options(arm), tmp_path)
    with pytest.raises(UserInputError, match=r"^providers\.azure\.regions: the catalog has no Azure offer"):
        AzureProvider.from_config(options(arm, regions=["nowhere"], subnet_id={"nowhere": subnet(arm, "x")}), tmp_path)


def test_the_entry_point_names_the_adapter():
    from gpuorch.registry import provider_class

    assert provider_class("azure") is AzureProvider


def test_the_sdk_is_imported_only_when_a_call_is_made():
    code = ("import sys, gpuorch_azure, gpuorch.registry; gpuorch.registry.provider_class('azure');"
            "print(sorted(m for m in sys.modules if m == 'azure' or m.startswith('azure.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# -- launching --------------------------------------------------------------------------------
def test_launch_creates_one_tagged_vm_only_if_missing(provider: AzureProvider, arm: FakeArm):
    inst = provider.launch(req())
    assert inst.id == "gpuorch-c0ffee000001-7-1" and inst.state == InstanceState.RUNNING and inst.spot
    assert provider.launch(req()).id == inst.id
    creates = arm.creates()
    assert len(creates) == 1 and creates[0]["headers"].get("if-none-match") == "*"
    assert arm.nics[f"{inst.id}-nic"]["tags"][TAG_JOB] == "7"
    assert arm.ips[f"{inst.id}-ip"]["tags"][TAG_MANAGED] == "true"
    assert inst.host == arm.ips[f"{inst.id}-ip"]["properties"]["ipAddress"] and inst.port == 22


def test_a_create_that_finds_the_name_taken_reports_exists(provider: AzureProvider, arm: FakeArm):
    provider.launch(req())
    with pytest.raises(Exists):
        provider.client().begin_create("gpuorch-c0ffee000001-7-1", {"location": "eastus", "properties": {}})


def test_private_address_without_a_public_ip(make_provider, arm: FakeArm):
    inst = make_provider(public_ip=False).launch(req())
    assert inst.host and inst.host.startswith("10.0.0.") and not arm.ips


def test_a_vm_still_booting_is_pending_without_an_address(provider: AzureProvider, arm: FakeArm):
    arm.boot_s = 60
    inst = provider.launch(req())
    assert inst.state == InstanceState.PENDING and inst.host is None
    arm.advance(60)
    assert provider.get(inst.id).state == InstanceState.RUNNING


def test_terminate_deletes_the_vm_with_its_nic_and_ip_and_is_quiet_after(provider: AzureProvider, arm: FakeArm):
    arm.delete_s = 20
    inst = provider.launch(req())
    provider.terminate(inst.id)
    assert provider.get(inst.id).state == InstanceState.STOPPING
    arm.advance(20)
    assert not arm.vms and not arm.nics and not arm.ips
    ended = provider.get(inst.id)
    assert ended.state == InstanceState.TERMINATED and ended.state_reason == "terminated-by-request"
    provider.terminate(inst.id)
    provider.terminate("not/a name")
    with pytest.raises(NotFoundError):
        provider.get("../etc")


def test_list_managed_pages_and_leaves_out_others(provider: AzureProvider, arm: FakeArm):
    arm.page_size = 1
    arm.add_vm("theirs", "eastus", "Standard_NC4as_T4_v3", {"team": "x"})
    ids = {provider.launch(req(attempt=a)).id for a in (1, 2, 3)}
    assert {i.id for i in provider.list_managed()} == ids
    assert sum(1 for r in arm.requests if r["method"] == "GET" and "$skiptoken" in r["query"]) >= 3


# -- errors, through the real SDK client -----------------------------------------------------
def test_a_sku_refused_at_submit_is_no_capacity_and_creates_nothing(provider: AzureProvider, arm: FakeArm):
    arm.refuse("SkuNotAvailable", "The requested size is currently not available in location 'eastus'.")
    with pytest.raises(NoCapacityError) as e:
        provider.launch(req())
    assert e.value.code == "SkuNotAvailable" and not arm.vms


@pytest.mark.parametrize("code", ["AllocationFailed", "ZonalAllocationFailed", "OverconstrainedAllocationRequest"])
def test_an_allocation_failure_is_no_capacity_and_the_vm_left_behind_is_deleted(provider: AzureProvider,
                                                                                 arm: FakeArm, code: str):
    arm.refuse(code, "no capacity", stage="operation")
    with pytest.raises(NoCapacityError) as e:
        provider.launch(req())
    assert e.value.code == code
    assert not arm.vms and not arm.nics and not arm.ips
    assert [r["method"] for r in arm.requests if r["path"].endswith("/virtualMachines/gpuorch-c0ffee000001-7-1")] \
        == ["GET", "PUT", "DELETE"]  # look, create (its operation failed), cleanup
    assert provider.list_managed() == []


def test_a_failed_vm_left_by_a_crash_is_deleted_by_the_next_launch(provider: AzureProvider, arm: FakeArm):
    arm.refuse("AllocationFailed", "no capacity", stage="operation", count=1)
    arm.fail_http(500, "InternalServerError", method="DELETE", count=None)  # the cleanup fails too
    with pytest.raises(NoCapacityError):
        provider.launch(req())
    assert arm.vms["gpuorch-c0ffee000001-7-1"]["properties"]["provisioningState"] == "Failed"
    arm.http_failures.clear()
    with pytest.raises(NoCapacityError, match="found failed"):
        provider.launch(req())
    assert not arm.vms


@pytest.mark.parametrize("code, message, error", [
    ("OperationNotAllowed", "Operation could not be completed as it results in exceeding approved "
                            "Standard NCASv3_T4 Family Cores quota.", QuotaError),
    ("OperationNotAllowed", "Operation could not be completed as it results in exceeding approved "
                            "LowPriorityCores quota.", QuotaError),
    ("QuotaExceeded", "Quota exceeded", QuotaError),
    ("OperationNotAllowed", "The VM size is not allowed in this subscription.", PermanentError),
    ("InvalidParameter", "The value of parameter imageReference is invalid.", PermanentError),
])
def test_quota_and_other_refusals(provider: AzureProvider, arm: FakeArm, code, message, error):
    arm.refuse(code, message, status=409 if code != "InvalidParameter" else 400)
    with pytest.raises(error) as e:
        provider.launch(req())
    assert type(e.value) is error and e.value.code == code and not arm.vms


def test_rejected_credentials_are_auth_errors(provider: AzureProvider, arm: FakeArm):
    arm.reject_tokens = True
    with pytest.raises(AuthError, match="InvalidAuthenticationToken.*DefaultAzureCredential"):
        provider.list_managed()
    arm.reject_tokens = False
    arm.fail_http(403, "AuthorizationFailed", count=None)
    with pytest.raises(AuthError, match="AuthorizationFailed"):
        provider.launch(req())


def test_a_credential_the_chain_cannot_get_is_an_auth_error(make_provider):
    from azure.core.exceptions import ClientAuthenticationError

    class NoLogin:
        def get_token(self, *scopes, **kw):
            raise ClientAuthenticationError("no credential found")

    with pytest.raises(AuthError, match="no credential found"):
        make_provider(credential=NoLogin()).list_managed()


def test_throttling_and_5xx_are_retried_then_succeed(provider: AzureProvider, arm: FakeArm, sleeps: list[float]):
    arm.fail_http(429, "TooManyRequests", method="PUT", count=2, headers={"Retry-After": "0"})
    inst = provider.launch(req())
    assert inst.state.alive and len(sleeps) == 2 and len(arm.creates()) == 3
    arm.fail_http(503, "ServiceUnavailable", method="GET", count=1)
    assert provider.get(inst.id).id == inst.id and len(sleeps) == 3


def test_persistent_5xx_gives_up_with_transient_error(make_provider, arm: FakeArm, sleeps: list[float]):
    provider = make_provider(max_attempts=3)
    arm.fail_http(500, "InternalServerError", count=None)
    with pytest.raises(TransientError, match="gave up after 3 attempts") as e:
        provider.list_managed()
    assert e.value.code == "InternalServerError" and len(sleeps) == 2


@pytest.mark.parametrize("code, status, cls", [
    ("SkuNotAvailable", 409, NoCapacityError), ("OverconstrainedZonalAllocationRequest", 409, NoCapacityError),
    ("ResourceNotFound", 404, NotFoundError), ("Whatever", 401, AuthError), ("Conflict", 409, PermanentError),
    ("Whatever", 429, TransientError), ("Whatever", 502, TransientError),
])
def test_classify(code, status, cls):
    assert classify(code, status) is cls


# -- evictions --------------------------------------------------------------------------------
def test_an_eviction_with_policy_deallocate_reads_preempted_even_after_a_restart(make_provider, arm: FakeArm):
    inst = make_provider(eviction_policy="Deallocate").launch(req())
    assert arm.vms[inst.id]["properties"]["evictionPolicy"] == "Deallocate"
    arm.evict(inst.id)
    fresh = make_provider(eviction_policy="Deallocate")  # a restarted daemon
    got = fresh.get(inst.id)
    assert got.state == InstanceState.PREEMPTED and got.state_reason == EVICTED_DEALLOCATED
    fresh.terminate(inst.id)
    assert not arm.vms


def test_an_eviction_with_policy_delete_is_known_only_to_the_provider_that_watched(make_provider, arm: FakeArm):
    watching = make_provider()
    inst = watching.launch(req())
    arm.evict(inst.id)
    assert watching.get(inst.id).state == InstanceState.PREEMPTED
    with pytest.raises(NotFoundError):  # documented: a restarted daemon sees the VM gone, not why
        make_provider().get(inst.id)


def test_an_on_demand_vm_deleted_by_someone_else_reads_terminated(provider: AzureProvider, arm: FakeArm):
    inst = provider.launch(req(spot=False))
    arm.handle("DELETE", f"/subscriptions/{arm.subscription}/resourceGroups/{arm.resource_group}/providers/"
               f"Microsoft.Compute/virtualMachines/{inst.id}", {}, {"authorization": f"Bearer {arm.token}"}, None)
    assert provider.get(inst.id).state == InstanceState.TERMINATED


def test_a_vm_powered_off_from_inside_is_deleted_because_it_still_bills(provider: AzureProvider, arm: FakeArm):
    inst = provider.launch(req())
    arm.power_off(inst.id)
    listed = {i.id: i for i in provider.list_managed()}
    assert listed[inst.id].state == InstanceState.STOPPING and listed[inst.id].state_reason == POWERED_OFF
    assert not arm.vms


def test_vm_states():
    def vm(prov="Succeeded", power=None, spot=False, failed=None):
        codes = [f"ProvisioningState/failed/{failed}" if failed else f"ProvisioningState/{prov.lower()}"]
        if power:
            codes.append(f"PowerState/{power}")
        return {"properties": {"provisioningState": "Failed" if failed else prov, "priority": "Spot" if spot else
                               "Regular", "instanceView": {"statuses": [{"code": c} for c in codes]}}}

    assert vm_state(vm("Creating"))[0] == InstanceState.PENDING
    assert vm_state(vm(power="starting"))[0] == InstanceState.PENDING
    assert vm_state(vm(power="running"))[0] == InstanceState.RUNNING
    assert vm_state(vm("Deleting", "running"))[0] == InstanceState.STOPPING
    assert vm_state(vm(power="deallocated", spot=True))[0] == InstanceState.PREEMPTED
    assert vm_state(vm(power="deallocated"))[0] == InstanceState.TERMINATED
    assert vm_state(vm(failed="AllocationFailed")) == (InstanceState.TERMINATED, "AllocationFailed")


# -- the runner -------------------------------------------------------------------------------
def test_the_runner_logs_in_as_the_admin_user_and_reads_scheduled_events(provider: AzureProvider, arm: FakeArm):
    inst = provider.launch(req())
    runner = provider.runner(inst)
    assert runner.notice.kind == "azure" and runner.connection.user == "azureuser"  # type: ignore[attr-defined]
    assert (runner.connection.host, runner.connection.port) == (inst.host, 22)  # type: ignore[attr-defined]
    put = arm.creates()[0]["body"]["properties"]["osProfile"]
    from gpuorch.runners.keys import ensure_host_key, ensure_job_key

    _, login = ensure_job_key(provider.home, 7)
    _, host_public = ensure_host_key(provider.home, 7, 1)
    assert put["linuxConfiguration"]["ssh"]["publicKeys"][0]["keyData"] == login
    cloud_config = yaml.safe_load(base64.b64decode(put["customData"]).decode())
    assert host_public.split()[1] in yaml.safe_dump(cloud_config["ssh_keys"])


def test_a_vanished_unmanaged_vm_is_never_listed(provider: AzureProvider, arm: FakeArm):
    arm.add_vm("theirs", "eastus", "Standard_NC4as_T4_v3", {"team": "x"})
    assert provider.get("theirs").state == InstanceState.RUNNING  # looked at once, by name
    del arm.vms["theirs"]
    assert provider.list_managed() == []
