"""Notice sources on their own: the file source, IMDSv2, GCE metadata and Azure Scheduled Events against local
fakes, each found by its kind in the ``gpuorch.notices`` registry."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from fake_imds import ACTION_PATH

from gpuorch.agent.notice import FileNotice, MetadataNotice, make_notice_source, notice_kinds, preempt_deadline
from gpuorch.agent.protocol import NoticeSource
from gpuorch_aws.notice import AwsNotice, parse_aws_time
from gpuorch_azure.notice import AzureNotice
from gpuorch_gcp.notice import GcpNotice


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def test_parse_aws_time():
    assert parse_aws_time("2017-09-18T08:22:00Z") == 1505722920.0


def test_file_notice(tmp_path):
    source = FileNotice(tmp_path / "notice.json")
    assert source.poll() is None
    (tmp_path / "notice.json").write_text('{"deadl')  # half-written: ask again later
    assert source.poll() is None
    (tmp_path / "notice.json").write_text(json.dumps({"deadline": 1234.5}))
    assert source.poll() == 1234.5


def test_aws_notice_uses_a_token_and_reads_the_deadline(imds):
    source = AwsNotice(imds.url)
    assert source.poll() is None  # 404: no notice
    when = int(time.time()) + 120
    imds.action = {"action": "terminate", "time": _iso(when)}
    assert source.poll() == when
    assert imds.unauthorized == 0


def test_the_fake_imds_rejects_requests_without_a_token(imds):
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(imds.url + ACTION_PATH, timeout=2)
    assert e.value.code == 401


def test_aws_notice_renews_a_rejected_token(imds):
    source = AwsNotice(imds.url)
    assert source.poll() is None
    imds.tokens.clear()  # the service forgot our token (expiry)
    imds.action = {"action": "stop", "time": _iso(time.time() + 60)}
    assert source.poll() is None  # 401: dropped the token
    assert source.poll() is not None  # fresh token


def test_aws_notice_quietly_answers_none_when_unreachable():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert AwsNotice(f"http://127.0.0.1:{port}", timeout_s=0.5).poll() is None


def test_unknown_notice_kind_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="notice.kind 'nosuch' is not supported"):
        make_notice_source(NoticeSource(kind="nosuch"), tmp_path)


class FakeGceMetadata:
    """GCE's metadata server, the one path the notice reads, on 127.0.0.1."""

    def __init__(self) -> None:
        self.preempted = "FALSE"
        self.without_flavor = 0  # requests refused for a missing Metadata-Flavor header
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.headers.get("Metadata-Flavor") != "Google":
                    fake.without_flavor += 1
                    return self._reply(403, b"Missing Metadata-Flavor:Google header.")
                if self.path.split("?")[0] != GcpNotice.PATH:
                    return self._reply(404, b"Not Found")
                self._reply(200, fake.preempted.encode())

            def _reply(self, code: int, body: bytes) -> None:
                self.send_response(code)
                self.send_header("Metadata-Flavor", "Google")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def gce_metadata():
    server = FakeGceMetadata()
    yield server
    server.close()


def test_gcp_notice_reads_preempted_and_keeps_its_deadline(gce_metadata):
    source = make_notice_source(NoticeSource(kind="gcp", url=gce_metadata.url), Path("."))
    assert isinstance(source, GcpNotice)
    assert source.poll() is None  # FALSE: no reclaim
    before = time.time()
    gce_metadata.preempted = "TRUE"
    deadline = source.poll()
    assert deadline is not None and before + 30 <= deadline <= time.time() + 30
    gce_metadata.preempted = "FALSE"  # the VM is going regardless: the deadline stands
    assert source.poll() == deadline
    assert gce_metadata.without_flavor == 0


def test_the_fake_gce_metadata_refuses_requests_without_the_flavor_header(gce_metadata):
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(gce_metadata.url + GcpNotice.PATH, timeout=2)
    assert e.value.code == 403


def test_gcp_notice_quietly_answers_none_when_unreachable():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert GcpNotice(f"http://127.0.0.1:{port}", timeout_s=0.5).poll() is None



# -- Azure Scheduled Events -------------------------------------------------------------------
def test_azure_notice_reads_a_preempt_events_not_before_and_keeps_it(scheduled_events, tmp_path):
    from fake_scheduled_events import event

    source = make_notice_source(NoticeSource(kind="azure", url=scheduled_events.url), tmp_path)
    assert isinstance(source, AzureNotice)
    assert source.poll() is None  # no events
    scheduled_events.announce(event("Reboot", time.time() + 600), event("Freeze", time.time() + 60))
    assert source.poll() is None  # maintenance is not an eviction
    when = int(time.time()) + 30
    scheduled_events.announce(event("Reboot", time.time() + 600), event("Preempt", when))
    assert source.poll() == when
    scheduled_events.announce()  # the document moves on; the VM is going regardless
    assert source.poll() == when
    assert scheduled_events.without_header == 0


def test_azure_notice_of_a_started_preempt_event_is_now(scheduled_events):
    from fake_scheduled_events import event

    scheduled_events.announce(event("Preempt", None, status="Started"))
    before = time.time()
    deadline = AzureNotice(scheduled_events.url).poll()
    assert deadline is not None and before <= deadline <= time.time()


def test_the_fake_scheduled_events_refuses_requests_without_the_metadata_header(scheduled_events):
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(scheduled_events.url + AzureNotice.PATH, timeout=2)
    assert e.value.code == 400


def test_azure_notice_quietly_answers_none_when_unreachable_or_garbled(scheduled_events):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert AzureNotice(f"http://127.0.0.1:{port}", timeout_s=0.5).poll() is None
    scheduled_events.document = {"Events": [{"EventType": "Preempt", "NotBefore": "not a date"}]}
    assert AzureNotice(scheduled_events.url).poll() is None


def test_preempt_deadline_parses_rfc1123_dates():
    doc = {"Events": [{"EventType": "Preempt", "NotBefore": "Mon, 19 Sep 2016 18:29:47 GMT"},
                      {"EventType": "Preempt", "NotBefore": "Mon, 19 Sep 2016 18:29:57 GMT"}]}
    assert preempt_deadline(doc) == 1474309787.0
    assert preempt_deadline({"DocumentIncarnation": 1, "Events": []}) is None



def test_the_registry_finds_each_kind_in_its_home():
    assert set(notice_kinds()) >= {"none", "file", "aws", "gcp", "azure"}
    homes = {k: type(make_notice_source(NoticeSource(kind=k, url="http://127.0.0.1:9"), Path("/run"))).__module__
             for k in ("none", "file", "aws", "gcp", "azure")}
    assert homes == {"none": "gpuorch.agent.notice", "file": "gpuorch.agent.notice", "aws": "gpuorch_aws.notice",
                     "gcp": "gpuorch_gcp.notice", "azure": "gpuorch_azure.notice"}
    assert issubclass(GcpNotice, MetadataNotice) and issubclass(AzureNotice, MetadataNotice)


def test_an_unknown_kind_names_the_known_ones():
    with pytest.raises(ValueError, match=r"notice.kind 'ibm' is not supported; use one of .*\baws\b"):
        make_notice_source(NoticeSource(kind="ibm"), Path("/run"))
