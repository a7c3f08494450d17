"""A real PostgreSQL for the HA tests: a throwaway database per test on a server found or started.

Where the server comes from (``GPUORCH_TEST_PG`` picks one; default ``auto`` tries them in order):

1. ``local``: the machine's own PostgreSQL on 127.0.0.1:5432, trust auth, user postgres (the
   project's CI machines start one with the machine; ``scripts/test-services.sh`` starts an
   installed but stopped cluster);
2. ``cluster``: a throwaway cluster (``initdb`` + ``pg_ctl``, run as the postgres user when we
   are root) on an ephemeral 127.0.0.1 port, removed after the session;
3. otherwise every ``postgres`` test is skipped with the reason. ``off`` skips them on purpose.

Each test gets ``CREATE DATABASE gpuorch_t_<random>``, dropped after it (``WITH (FORCE)``).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid

import pytest

from gpuorch.store import Store

HINT = "install PostgreSQL (apt-get install postgresql) or run scripts/test-services.sh"


def _psycopg():
    try:
        import psycopg
    except ImportError:
        pytest.skip("psycopg is not installed: pip install -e '.[dev]' (or gpuorch[postgres])")
    return psycopg


def _reachable(host: str, port: int) -> bool:
    psycopg = _psycopg()
    try:
        psycopg.connect(host=host, port=port, user="postgres", dbname="postgres", connect_timeout=3).close()
        return True
    except psycopg.OperationalError:
        return False


def _pg_bin(name: str) -> str | None:
    found = shutil.which(name) or sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found if isinstance(found, str) else (found[-1] if found else None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Cluster:
    """initdb + pg_ctl in a temp dir; as root, everything runs as the postgres user."""

    def __init__(self, initdb: str) -> None:
        self.bindir = os.path.dirname(initdb)
        self.dir = tempfile.mkdtemp(prefix="gpuorch-pg-")
        self.data, self.port = os.path.join(self.dir, "data"), _free_port()
        self.as_user = []
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
            self.as_user = ["runuser", "-u", "postgres", "--"]

    def _run(self, *args: str) -> None:
        subprocess.run([*self.as_user, *args], check=True, capture_output=True, timeout=60)

    def start(self, extra: str = "") -> None:
        self._run(f"{self.bindir}/initdb", "-D", self.data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8")
        opts = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.dir} -c fsync=off -c max_connections=200 {extra}"
        self._run(f"{self.bindir}/pg_ctl", "-D", self.data, "-l", os.path.join(self.dir, "log"), "-o", opts,
                  "-w", "start")

    def stop(self) -> None:
        try:
            self._run(f"{self.bindir}/pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_server():
    """(host, port) of a PostgreSQL that accepts user postgres without a password."""
    mode = os.environ.get("GPUORCH_TEST_PG", "auto")
    if mode == "off":
        pytest.skip("GPUORCH_TEST_PG=off")
    if mode in ("auto", "local") and _reachable("127.0.0.1", 5432):
        yield "127.0.0.1", 5432
        return
    if mode == "local":
        pytest.skip(f"GPUORCH_TEST_PG=local but nothing accepts user postgres on 127.0.0.1:5432; {HINT}")
    initdb = _pg_bin("initdb")
    if initdb is None:
        pytest.skip(f"no PostgreSQL: nothing accepts on 127.0.0.1:5432 and initdb is not installed; {HINT}")
    cluster = _Cluster(initdb)
    try:
        cluster.start()
    except (subprocess.SubprocessError, OSError) as e:
        cluster.stop()
        pytest.skip(f"no PostgreSQL: 127.0.0.1:5432 is closed and a throwaway cluster did not start ({e}); {HINT}")
    try:
        yield "127.0.0.1", cluster.port
    finally:
        cluster.stop()


@pytest.fixture
def pg_url(pg_server):
    """A fresh, empty database for this test; the SQLAlchemy URL gpuorch takes."""
    psycopg = _psycopg()
    host, port = pg_server
    name = f"gpuorch_t_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(host=host, port=port, user="postgres", dbname="postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
        # commits need not wait for the disk: a throwaway database, and a shared server's fsyncs
        conn.execute(f'ALTER DATABASE "{name}" SET synchronous_commit = off')
    yield f"postgresql+psycopg://postgres@{host}:{port}/{name}"
    with psycopg.connect(host=host, port=port, user="postgres", dbname="postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def store(pg_url):
    """The state store on PostgreSQL (overrides the SQLite one of tests/conftest.py)."""
    s = Store(pg_url)
    yield s
    s.close()
