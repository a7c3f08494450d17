"""Issue 31, item 1: an uploaded workdir archive never writes outside its directory.

``tarfile``'s ``data`` filter let a chain of symlinks escape on CPython before 3.11.13
(CVE-2025-4517: links nested until ``os.path.realpath`` passes PATH_MAX and stops expanding,
then a link "up" the whole chain, a hard link through it to a file outside, and a write through
that). ``gpuorch.api.upload`` checks every member itself, whatever the Python: these tests build
archives of that shape (and of each rule's) with ``tarfile``, unpack them directly and through the
real API server, and check the refusal names the member and the rule and nothing is written.
"""

from __future__ import annotations

import base64
import io
import json
import os
import secrets
import tarfile
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuorch.api import upload
from gpuorch.errors import UserInputError
from gpuorch.ops.config import ApiConfig, DaemonConfig
from gpuorch.store import Store

# One member: (name, kind, link target or file contents). Kinds: file, dir, sym, hard, fifo, chr.
Member = tuple[str, str, str]


def archive(members: Iterable[Member]) -> str:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as tf:
        for name, kind, arg in members:
            info = tarfile.TarInfo(name)
            info.mode = 0o755 if kind == "dir" else 0o644
            info.type = {"file": tarfile.REGTYPE, "dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE,
                         "hard": tarfile.LNKTYPE, "fifo": tarfile.FIFOTYPE, "chr": tarfile.CHRTYPE}[kind]
            data = arg.encode() if kind == "file" else b""
            if kind in ("sym", "hard"):
                info.linkname = arg
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return base64.b64encode(buf.getvalue()).decode()


@pytest.fixture
def site(tmp_path):
    """``uploads`` next to a victim directory an escape would reach: ``victim/flag``."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "flag").write_text("original")
    (tmp_path / "uploads").mkdir()
    return tmp_path


def untouched(site: Path) -> None:
    """Nothing of a refused upload is left, and nothing outside ``uploads`` changed."""
    assert sorted(p.name for p in site.iterdir()) == ["uploads", "victim"]
    assert list((site / "uploads").iterdir()) == []
    assert sorted(p.name for p in (site / "victim").iterdir()) == ["flag"]
    assert (site / "victim" / "flag").read_text() == "original"


def cve_2025_4517(dest_len: int, component_len: int | None = None, real_path: bool = False) -> list[Member]:
    """The CVE's archive (CPython's test_realpath_limit_attack): directories of long names, a
    one-letter symlink to each, a link at the end of the chain back up the whole chain, a link
    "escape" one above that, a hard link through it to ../victim/flag, and writes through both.
    ``real_path``: the last link named by its directories (not written through the letters)."""
    steps = "abcdefghijklmnop"
    if component_len is None:
        component_len = (os.pathconf("/", "PC_PATH_MAX") - dest_len) // (len(steps) + 1)
    component = "d" * component_len
    members: list[Member] = []
    path = ""
    for step in steps:
        members += [(os.path.join(path, component), "dir", ""), (os.path.join(path, step), "sym", component)]
        path = os.path.join(path, component)
    linkpath = os.path.join(*steps, "l" * 254)
    members += [(os.path.join(path, "l" * 254) if real_path else linkpath, "sym", os.path.join(*[".."] * len(steps))),
                ("escape", "sym", os.path.join(linkpath, "..", "..", "victim"))]
    if not real_path:
        members += [("flaglink", "hard", "escape/flag"), ("flaglink", "file", "overwrite"),
                    ("escape/newfile", "file", "new")]
    return members


def test_the_cve_2025_4517_archive_is_refused_and_writes_nothing(site):
    dest_len = len(str(site / "uploads" / ("0" * 32))) + 1
    with pytest.raises(UserInputError) as e:
        upload.unpack(archive(cve_2025_4517(dest_len)), site / "uploads")
    msg = str(e.value)
    assert msg.startswith("workdir_tar: member 'dddd") and "longer than 1024 bytes" in msg and "\n" not in msg
    untouched(site)


def test_the_cve_shape_is_refused_by_the_link_rules_too_when_paths_may_be_long(site, monkeypatch):
    """Path limits raised past PATH_MAX: the links themselves are refused (no realpath truncation)."""
    monkeypatch.setattr(upload, "MAX_PATH", 1 << 16)
    dest_len = len(str(site / "uploads" / ("0" * 32))) + 1
    with pytest.raises(UserInputError, match=r"member 'a/b/c/.*l{20}.*': would be written through the link 'a'"):
        upload.unpack(archive(cve_2025_4517(dest_len)), site / "uploads")
    untouched(site)
    # no member under a link: "escape" is refused, its target resolved through all sixteen, then up
    with pytest.raises(UserInputError, match=r"member 'escape': its link target leaves the upload"):
        upload.unpack(archive(cve_2025_4517(dest_len, real_path=True)), site / "uploads")
    untouched(site)


@pytest.mark.parametrize("members, member, rule", [
    ([("/abs/file", "file", "x")], "/abs/file", "is absolute"),
    ([("a/../../victim/flag", "file", "x")], "a/../../victim/flag", "holds '..'"),
    ([("up", "sym", "/tmp")], "up", "link target is absolute"),
    ([("up", "sym", "../victim")], "up", "leaves the upload"),
    ([("sub/up", "sym", "../../victim")], "sub/up", "leaves the upload"),
    ([("a", "sym", "b"), ("b", "sym", "c/.."), ("c", "sym", ".."), ("x", "sym", "a/victim")], "a", "leaves"),
    ([("sub", "dir", ""), ("d", "sym", "sub"), ("d/f", "file", "x")], "d/f", "written through the link 'd'"),
    ([("d", "sym", "."), ("d/d/f", "file", "x")], "d/d/f", "written through the link 'd'"),
    ([("f", "file", "x"), ("f/g", "file", "x")], "f/g", "written through the file 'f'"),
    ([("f", "file", "x"), ("f", "sym", "..")], "f", "earlier member holds"),
    ([("f", "sym", "g"), ("f", "file", "x")], "f", "earlier member holds"),
    ([("sub", "dir", ""), ("sub", "sym", "..")], "sub", "earlier member holds"),
    ([("h", "hard", "../victim/flag")], "h", "holds '..'"),
    ([("l", "sym", "../victim"), ("h", "hard", "l/flag")], "l", "leaves the upload"),
    ([("h", "hard", "later"), ("later", "file", "x")], "h", "no file before it"),
    ([("h", "hard", "/etc/passwd")], "h", "is absolute"),
    ([("a", "sym", "b"), ("b", "sym", "a")], "a", "links deep (a loop?)"),
    ([("pipe", "fifo", "")], "pipe", "FIFO"),
    ([("dev", "chr", "")], "dev", "special file"),
    ([("x" * 300, "file", "x")], "x" * 60, "longer than 255 bytes"),
    ([("/".join(["d"] * 70), "file", "x")], "d/d/d", "more than 64 directories deep"),
    ([("a/" * 600 + "f", "file", "x")], "a/a/a", "longer than 1024 bytes"),
    ([("s", "sym", "x" * 2000)], "s", "over 1024 bytes"),
    ([(".", "file", "x")], ".", "names the upload's root"),
])
def test_each_rule_refuses_the_whole_archive_naming_member_and_rule(site, members, member, rule):
    ok = [("ok.txt", "file", "fine"), ("ok", "dir", "")]  # before the offence: also not written
    with pytest.raises(UserInputError) as e:
        upload.unpack(archive(ok + members), site / "uploads")
    msg = str(e.value)
    assert msg.startswith(f"workdir_tar: member {member[:60]!r}"[:-1]) and rule in msg and "\n" not in msg, msg
    untouched(site)


def test_sizes_and_counts_are_bounded_before_anything_is_written(site):
    with pytest.raises(UserInputError, match=r"member 'big': 2000 bytes, over the 1000 bytes one file may hold"):
        upload.unpack(archive([("small", "file", "x"), ("big", "file", "y" * 2000)]), site / "uploads",
                      max_bytes=1000)
    with pytest.raises(UserInputError, match=r"unpacks to over .*api\.max_upload_bytes"):
        upload.unpack(archive([(f"f{i}", "file", "y" * 600) for i in range(3)]), site / "uploads", max_bytes=1000)
    with pytest.raises(UserInputError, match=r"over 5 files \(api\.max_upload_files\)"):
        upload.unpack(archive([(f"f{i}", "file", "") for i in range(6)]), site / "uploads", max_files=5)
    untouched(site)


def test_a_workdir_with_links_inside_unpacks_as_packed(tmp_path):
    src = tmp_path / "src"
    (src / "versions" / "1").mkdir(parents=True)
    (src / "versions" / "1" / "model.py").write_text("print(1)\n")
    (src / "run.sh").write_text("#!/bin/sh\n")
    (src / "run.sh").chmod(0o755)
    (src / "current").symlink_to("versions/1")
    (src / "versions" / "1" / "top").symlink_to("../../run.sh")
    (src / "loop").symlink_to("versions/../current/top")
    dest = upload.unpack(upload.pack(src), tmp_path / "uploads")
    assert (dest / "current" / "model.py").read_text() == "print(1)\n"
    assert (dest / "loop").read_text() == "#!/bin/sh\n" and os.access(dest / "run.sh", os.X_OK)
    assert os.readlink(dest / "current") == "versions/1"
    hard = upload.unpack(archive([("a", "file", "data"), ("c", "sym", "a"), ("b", "hard", "c")]), tmp_path / "up2")
    assert (hard / "b").read_text() == "data" and os.stat(hard / "b").st_ino == os.stat(hard / "a").st_ino


# -- the property: whatever the members, nothing is ever written outside the destination ----------

PARTS = st.sampled_from(["a", "b", "c", "a", "b", "c", "..", ".", "", "victim", "flag"])  # mostly plain names
NAMES = st.lists(PARTS, min_size=1, max_size=4).map("/".join)
TARGETS = st.one_of(NAMES, NAMES.map(lambda n: "/" + n), NAMES.map(lambda n: "../" + n))
MEMBERS = st.lists(st.one_of(
    st.tuples(NAMES, st.just("file"), st.sampled_from(["x", "overwrite"])),
    st.tuples(NAMES, st.just("dir"), st.just("")),
    st.tuples(NAMES, st.just("sym"), TARGETS),
    st.tuples(NAMES, st.just("hard"), TARGETS),
), max_size=8)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(members=MEMBERS)
def test_no_archive_ever_writes_outside_its_directory(members):
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp)
        (site / "victim").mkdir()
        (site / "victim" / "flag").write_text("original")
        (site / "uploads").mkdir()
        try:
            dest = upload.unpack(archive(members), site / "uploads")
        except UserInputError as e:
            assert str(e).startswith("workdir_tar: ") and "\n" not in str(e)
            untouched(site)
            return
        assert sorted(p.name for p in site.iterdir()) == ["uploads", "victim"]
        assert [p.name for p in (site / "victim").iterdir()] == ["flag"]
        assert (site / "victim" / "flag").read_text() == "original"
        real = os.path.realpath(dest)
        for root, dirs, files in os.walk(dest):  # links are listed, never followed
            for name in dirs + files:
                path = os.path.join(root, name)
                assert os.path.realpath(path).startswith(real + os.sep) or os.path.realpath(path) == real, path


# -- through the real API server -----------------------------------------------------------------

@pytest.fixture
def api(_isolated_home, monkeypatch):
    pytest.importorskip("fastapi", reason="the server extra is not installed: pip install -e '.[dev]'")
    from gpuorch.api.server import ApiThread

    monkeypatch.delenv("GPUORCH_API_TOKEN", raising=False)
    token = secrets.token_urlsafe(24)
    store = Store(f"sqlite:///{_isolated_home / 'state.db'}")
    server = ApiThread(DaemonConfig(home=_isolated_home, api=ApiConfig(token=token, port=0)), store).start()
    yield server, token, _isolated_home
    server.stop()
    store.close()


def post(url: str, token: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.mark.parametrize("path", ["/v1/jobs", "/v1/sweeps"])
def test_the_api_refuses_an_escaping_upload_with_one_line_and_stores_nothing(api, path):
    server, token, home = api
    victim = home / "victim"  # where the archive's "escape" leads: beside uploads/
    victim.mkdir()
    (victim / "flag").write_text("original")
    dest_len = len(str(home / "uploads" / ("0" * 32))) + 1
    members = cve_2025_4517(dest_len, component_len=8)  # within the path limits: the link rules refuse
    job = {"name": "x", "run": "true", "resources": {"gpu": "A100:80GB:1"}}
    spec = job if path == "/v1/jobs" else {"name": "s", "job": job, "parameters": {"X": [1]}}
    code, body = post(server.url + path, token, {"spec": spec, "workdir_tar": archive(members)})
    assert code == 422, body
    assert body["error"].startswith("workdir_tar: member 'a/b/c/") and "written through the link 'a'" in body["error"]
    assert (victim / "flag").read_text() == "original" and [p.name for p in victim.iterdir()] == ["flag"]
    assert not (home / "uploads").exists() or list((home / "uploads").iterdir()) == []
    with urllib.request.urlopen(urllib.request.Request(server.url + "/v1/jobs", headers={
            "Authorization": f"Bearer {token}"}), timeout=60) as r:
        assert json.loads(r.read()) == []
