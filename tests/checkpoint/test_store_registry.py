"""The typed store URL (gpuorch.checkpoint.url) and the gpuorch.stores registry: one scheme
table, read by spec validation, open_store and placement."""

from __future__ import annotations

import pytest

from gpuorch.checkpoint import STORE_PLUGINS, StoreUrl, UnsupportedStore, schemes, store_class, store_provider
from gpuorch.checkpoint.filestore import FileStore
from gpuorch.errors import UserInputError
from gpuorch.jobs.spec import load_spec


@pytest.mark.parametrize("raw, parts", [
    ("s3://bucket/team/jobs/", ("s3", "bucket", "", "team/jobs", False)),
    ("GS://b", ("gs", "b", "", "", False)),
    ("az://ckpt@MyAccount/runs/1", ("az", "ckpt", "myaccount", "runs/1", False)),
    ("az://c:secret@acct/p", ("az", "c:secret", "acct", "p", True)),
    ("s3://b/p?versionId=1", ("s3", "b", "", "p", True)),
    ("file:///tmp/my%20store", ("file", "", "", "tmp/my%20store", False)),
])
def test_a_url_is_split_once_into_its_parts(raw: str, parts: tuple[str, str, str, str, bool]):
    url = StoreUrl.parse(raw)
    assert (url.scheme, url.bucket, url.account, url.prefix, url.extras) == parts
    assert url.raw == str(url) == raw


def test_a_file_url_keeps_its_unquoted_path_and_host():
    url = StoreUrl.parse("file://localhost/tmp/my%20store")
    assert (url.path, url.host) == ("/tmp/my store", "localhost")


@pytest.mark.parametrize("raw", ["/tmp/ckpt", "s3:/b", "://b"])
def test_a_url_without_a_scheme_names_the_form(raw: str):
    with pytest.raises(ValueError, match=r"cannot read checkpoint store URL .*; write scheme://bucket/prefix"):
        StoreUrl.parse(raw)


@pytest.mark.parametrize("raw", ["s3:///p", "s3://c@acct/p", "s3://b/p#frag"])
def test_bucket_only_refuses_what_a_bucket_store_cannot_read(raw: str):
    with pytest.raises(ValueError, match=r"write s3://bucket/prefix$"):
        StoreUrl.parse(raw).bucket_only("s3://bucket/prefix")


def test_each_store_declares_its_cloud_and_extra():
    declared = {s: (store_class(s).provider, store_class(s).extra) for s in schemes()}
    assert declared == {"file": (None, ""), "s3": ("aws", "aws"), "gs": ("gcp", "gcp"), "az": ("azure", "azure")}
    assert store_class("file") is FileStore and store_provider("s3") == "aws" and store_provider("ftp") is None


def test_a_store_module_is_in_its_adapter():
    assert {s: STORE_PLUGINS.module(s) for s in schemes()} == {
        "file": "gpuorch.checkpoint.filestore", "s3": "gpuorch_aws.store",
        "gs": "gpuorch_gcp.store", "az": "gpuorch_azure.store",
    }


def test_an_unknown_scheme_is_refused_naming_the_registered_ones():
    with pytest.raises(UnsupportedStore, match=r"^unsupported checkpoint store 'ftp://'; use one of .*s3://"):
        store_class("ftp")


def _spec(tmp_path, store: str) -> str:
    p = tmp_path / "job.yaml"
    p.write_text(f"name: ft\nrun: python train.py\ncheckpoint:\n  store: {store}\n")
    return str(p)


def test_the_spec_accepts_exactly_the_registered_schemes(tmp_path, monkeypatch: pytest.MonkeyPatch):
    with pytest.raises(UserInputError, match=r"checkpoint.store.*unsupported checkpoint store 'mem://x'"):
        load_spec(_spec(tmp_path, "mem://x"))
    monkeypatch.setitem(STORE_PLUGINS.table, "mem", "gpuorch.checkpoint.filestore:FileStore")  # a plugin's
    spec = load_spec(_spec(tmp_path, "mem://x/runs"))
    assert spec.checkpoint is not None and spec.checkpoint.url == StoreUrl.parse("mem://x/runs")
