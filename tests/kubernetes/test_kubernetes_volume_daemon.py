"""A ``volume:`` job on Kubernetes through the assembled daemon: the daemon creates the job's
PersistentVolumeClaim before the first launch and names it in every launch; the first pod writes
on it, is evicted (the Eviction API, as a drain does), and the next attempt's pod reads what the
first wrote. The fake kubelet mounts the claim as a link at the spec's mount path
(``gpuorch.testing.fake_storage``; the path is under the test's own directory)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from k8s_harness import cluster
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import PersistentVolumeClaim, Pod

from gpuorch.store.models import JobStatus, TerminationReason
from gpuorch.testing.daemon import AssembledDaemon

pytestmark = [pytest.mark.kubernetes, pytest.mark.timeout(300)]

# Writes "attempt N" on the volume if nothing is there yet; reports what it found in <out>/<N>.
JOB = r"""
import os, pathlib, sys, time
out, vol = pathlib.Path(sys.argv[1]), pathlib.Path(os.environ["GPUORCH_VOLUME_DIR"])
attempt = os.environ["GPUORCH_ATTEMPT"]
note = vol / "note.txt"
found = note.read_text() if note.exists() else ""
if not found:
    note.write_text("written by attempt " + attempt)
(out / ".tmp").write_text(found or "nothing")
(out / ".tmp").rename(out / attempt)
while not (out / "go").exists():
    time.sleep(0.1)
"""


def test_a_volume_job_reads_after_an_eviction_what_its_first_pod_wrote(tmp_path: Path) -> None:
    out, mount = tmp_path / "out", tmp_path / "mnt" / "data"
    out.mkdir()
    (tmp_path / "job.py").write_text(JOB)
    with cluster(tmp_path) as k8s, AssembledDaemon.start(
            tmp_path / "home", {"providers": {"kubernetes": k8s.options()}}) as d:
        k8s.kubelet.mount_links = True
        job = d.submit({"name": "vol", "run": f"{sys.executable} {tmp_path / 'job.py'} {out}",
                        "resources": {"gpu": "A100:80GB:1"}, "volume": {"size": "10GB", "mount": str(mount)}})
        d.until(lambda: (out / "1").exists(), timeout_s=120, what="attempt 1 to write on its volume")
        assert (out / "1").read_text() == "nothing"
        client = k8s.client()
        claims = client.list(PersistentVolumeClaim, namespace="default", labels={"gpuorch.dev/job": str(job)})
        assert len(list(claims)) == 1
        pod = d.attempts(job)[0].instance_id.split(":", 1)[1]
        client.create(Pod.Eviction(metadata=ObjectMeta(name=pod, namespace="default")), name=pod,
                      namespace="default")
        d.until(lambda: (out / "2").exists(), timeout_s=120, what="attempt 2 to start")
        assert (out / "2").read_text() == "written by attempt 1"
        (out / "go").touch()
        done = d.until_terminal(job, timeout_s=120)
        a1 = d.attempts(job)[0]
        assert a1.reason == TerminationReason.PREEMPTED and done.status == JobStatus.SUCCEEDED
        assert k8s.kubelet.errors == []
