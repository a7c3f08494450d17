"""The kmock extension (``gpuorch.testing.kmock_ext``) behaves as the real API server does where
plain kmock does not: selectors, uid and resourceVersion, generateName, graceful pod deletion,
the Eviction API, exec, and Status errors a real client understands."""

from __future__ import annotations

import pytest
from lightkube import ApiError
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap, Pod

from gpuorch.testing.kmock_ext import selector_matches

pytestmark = pytest.mark.kubernetes


def pod(name: str = "", labels: dict[str, str] | None = None, **meta: object) -> Pod:
    return Pod.from_dict({"metadata": {"name": name, "labels": labels or {}, **meta},
                          "spec": {"containers": [{"name": "main", "image": "busybox"}]}})


@pytest.mark.parametrize(("selector", "labels", "expected"), [
    ("a=1", {"a": "1"}, True), ("a==1", {"a": "1"}, True), ("a=1", {"a": "2"}, False), ("a=1", {}, False),
    ("a!=1", {"a": "2"}, True), ("a!=1", {}, True), ("a!=1", {"a": "1"}, False),
    ("a", {"a": ""}, True), ("a", {"b": "1"}, False), ("!a", {"b": "1"}, True), ("!a", {"a": "1"}, False),
    ("a in (1, 2)", {"a": "2"}, True), ("a in (1,2)", {"a": "3"}, False), ("a notin (1,2)", {}, True),
    ("a notin (1,2)", {"a": "1"}, False), ("a=1,b in (x,y),!c", {"a": "1", "b": "y"}, True),
    ("a=1,b in (x,y),!c", {"a": "1", "b": "y", "c": ""}, False),
])
def test_label_selectors_follow_the_kubernetes_grammar(selector: str, labels: dict[str, str], expected: bool) -> None:
    assert selector_matches(selector, labels) is expected


def test_list_filters_by_label_selector(client) -> None:
    client.create(pod("a", {"app": "x", "tier": "1"}))
    client.create(pod("b", {"app": "y"}))
    client.create(pod("c", {"app": "x", "tier": "2"}))
    assert sorted(p.metadata.name for p in client.list(Pod, labels={"app": "x"})) == ["a", "c"]
    assert [p.metadata.name for p in client.list(Pod, labels={"app": "x", "tier": "2"})] == ["c"]
    assert sorted(p.metadata.name for p in client.list(Pod)) == ["a", "b", "c"]


def test_create_stamps_uid_namespace_and_a_growing_resource_version(client) -> None:
    a, b = client.create(pod("a")), client.create(pod("b"))
    assert a.metadata.uid and b.metadata.uid and a.metadata.uid != b.metadata.uid
    assert a.metadata.namespace == "default" and a.metadata.creationTimestamp is not None
    assert int(b.metadata.resourceVersion) > int(a.metadata.resourceVersion)
    client.patch(Pod, "a", {"metadata": {"labels": {"k": "v"}}})
    assert int(client.get(Pod, "a").metadata.resourceVersion) > int(b.metadata.resourceVersion)


def test_generate_name_makes_a_fresh_name_each_time(client) -> None:
    names = {client.create(pod(generateName="job-")).metadata.name for _ in range(3)}
    assert len(names) == 3 and all(n.startswith("job-") and len(n) == len("job-") + 5 for n in names)


def test_errors_are_status_objects_a_client_understands(client) -> None:
    client.create(pod("a"))
    with pytest.raises(ApiError) as dup:
        client.create(pod("a"))
    assert (dup.value.status.code, dup.value.status.reason) == (409, "AlreadyExists")
    with pytest.raises(ApiError) as missing:
        client.get(Pod, "nope")
    assert missing.value.status.code == 404


def test_a_forbidden_namespace_answers_403_as_rbac_does(kube, client) -> None:
    kube.emulator.forbid("secret")
    with pytest.raises(ApiError) as e:
        list(client.list(Pod, namespace="secret"))
    assert e.value.status.code == 403 and 'cannot list resource "pods"' in e.value.status.message
    list(client.list(Pod, namespace="default"))  # others are untouched


def test_an_exceeded_quota_refuses_pod_creation(kube, client) -> None:
    kube.emulator.reject_pods("default", "gpu-quota, requested: requests.nvidia.com/gpu=1, limited: 0")
    with pytest.raises(ApiError) as e:
        client.create(pod("a"))
    assert e.value.status.code == 403 and "exceeded quota: gpu-quota" in e.value.status.message
    client.create(ConfigMap(metadata=ObjectMeta(name="cm")))  # only pods are counted
    kube.emulator.reject_pods("default", None)
    client.create(pod("a"))


def test_deleting_a_bound_pod_is_graceful_and_finalizers_keep_a_tombstone(client) -> None:
    client.create(pod("a", finalizers=["example.com/keep"]))
    client.patch(Pod, "a", {"spec": {"nodeName": "n1", "terminationGracePeriodSeconds": 30}})
    client.delete(Pod, "a")
    marked = client.get(Pod, "a")
    assert marked.metadata.deletionTimestamp is not None and marked.metadata.deletionGracePeriodSeconds == 30
    client.delete(Pod, "a", grace_period=0)
    assert client.get(Pod, "a").metadata.deletionGracePeriodSeconds == 0  # held by its finalizer
    client.patch(Pod, "a", {"metadata": {"finalizers": []}})
    with pytest.raises(ApiError) as e:
        client.get(Pod, "a")
    assert e.value.status.code == 404


def test_an_unbound_pod_without_finalizers_is_deleted_at_once(client) -> None:
    client.create(pod("a"))
    client.delete(Pod, "a")
    with pytest.raises(ApiError):
        client.get(Pod, "a")


def test_the_eviction_api_marks_the_pod_with_its_disruption_reason(client) -> None:
    client.create(pod("a"))
    client.patch(Pod, "a", {"spec": {"nodeName": "n1"}})
    client.create(Pod.Eviction(metadata=ObjectMeta(name="a", namespace="default")), name="a")
    evicted = client.get(Pod, "a")
    assert evicted.metadata.deletionTimestamp is not None
    assert [(c.type, c.reason) for c in evicted.status.conditions] == [("DisruptionTarget", "EvictionByEvictionAPI")]


def test_exec_runs_through_the_handler_with_stdin_and_the_exit_code(kube, client) -> None:
    client.create(pod("a"))
    seen = []

    def handler(ns, name, container, argv, stdin):
        seen.append((ns, name, argv))
        return 3, b"out:" + stdin, b"err"

    kube.emulator.exec_handler = handler
    r = client.exec("a", command=["cat", "x y"], stdin=b"hello", stdout=True, stderr=True)
    assert (r.stdout, r.stderr, r.exit_code) == ("out:hello", "err", 3)
    assert seen == [("default", "a", ["cat", "x y"])]
    kube.emulator.exec_handler = lambda *a: None  # no running container
    with pytest.raises(ApiError):
        client.exec("a", command=["true"], stdin=b"", stdout=True)


def test_reads_leave_the_request_history_and_writes_stay(kube, client) -> None:
    """kmock walks its whole request history on every request: reads are dropped once answered."""
    from lightkube.resources.core_v1 import ConfigMap

    client.create(ConfigMap.from_dict({"metadata": {"name": "kept"}, "data": {"a": "1"}}))
    for _ in range(20):
        client.get(ConfigMap, "kept")
        list(client.list(ConfigMap))
    assert [(r.method.value, r.url.path) for r in kube.emulator] == [
        ("POST", "/api/v1/namespaces/default/configmaps")]
