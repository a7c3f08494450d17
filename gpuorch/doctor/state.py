"""Doctor checks of what the daemon reads: its configuration, its database, and the checkpoint
stores of the jobs it is responsible for. None of them writes anything."""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine, make_url

from gpuorch.doctor.context import Context
from gpuorch.doctor.findings import Finding
from gpuorch.errors import UserInputError

if TYPE_CHECKING:
    from gpuorch.checkpoint.url import StoreUrl


def hide_password(url: str) -> str:
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # not a URL SQLAlchemy knows; show only the host part
        return "…@" + url.rsplit("@", 1)[-1] if "@" in url else url


def sqlite_path(url: str) -> Path | None:
    """The file of a ``sqlite:///`` URL; None for other databases and in-memory ones."""
    if not url.startswith("sqlite"):
        return None
    path = make_url(url).database
    return Path(path) if path and path != ":memory:" else None


def read_only_engine(url: str) -> Engine:
    """An engine that cannot change the database (SQLite opened ``mode=ro``)."""
    path = sqlite_path(url)
    if path is not None:
        return create_engine("sqlite://", creator=lambda: sqlite3.connect(f"file:{path}?mode=ro", uri=True))
    return create_engine(url, pool_pre_ping=True)


# -- configuration ---------------------------------------------------------------------------
def check_config(ctx: Context) -> Iterator[Finding]:
    from gpuorch.ops.config_sources import load, read_file

    try:
        ctx.loaded = load(ctx.config_path)
    except UserInputError as e:
        yield Finding.fail("config", str(e), "correct the option named above; every option is listed in "
                           "configs/daemon.yaml")
        return
    sources = ", ".join(ctx.loaded.sources) or "built-in defaults only"
    yield Finding.ok("config", f"valid; from {sources}; state directory {ctx.loaded.config.home}")
    for file in ctx.loaded.files:  # a password in a file others can read
        data = read_file(file) or {}
        url = data.get("database_url")
        try:
            secret = bool(url and make_url(str(url)).password)
        except Exception:  # a malformed URL is the database check's business
            secret = False
        if secret and file.stat().st_mode & stat.S_IROTH:
            yield Finding.warn("config", f"{file} holds a database password and every user can read it",
                               f"chmod o-r {file} (or pass the URL as GPUORCH_DATABASE_URL)")


# -- database --------------------------------------------------------------------------------
def check_database(ctx: Context) -> Iterator[Finding]:
    from gpuorch.store.migrations import SCHEMA_VERSION

    if ctx.config is None:
        return
    url = ctx.config.url
    path = sqlite_path(url)
    if path is not None:
        if not path.exists():
            yield Finding.warn("database", f"no database yet at {path}",
                               "start the daemon once; it creates the database (systemctl start gpuorch)")
            return
        if not os.access(path.parent, os.W_OK) or not os.access(path, os.R_OK | os.W_OK):
            yield Finding.fail("database", f"{path} (or its directory) is not writable by this user",
                               f"run as the daemon's user, or: chown -R {os.getuid()} {path.parent}")
    where = str(path) if path else hide_password(url)
    engine = None
    try:
        engine = read_only_engine(url)
        with engine.connect() as conn:
            row = conn.execute(text("SELECT value FROM meta WHERE key = 'schema_version'")).first()
            mode = conn.execute(text("PRAGMA journal_mode")).scalar() if path else None
    except ModuleNotFoundError as e:
        yield Finding.fail("database", f"cannot open {where}: its driver {e.name} is not installed",
                           f"pip install {e.name} into gpuorch's environment (psycopg[binary] for PostgreSQL)")
        return
    except Exception as e:  # any driver error: report it, hide the password
        yield Finding.fail("database", f"cannot open {where}: {type(e).__name__}: {_first_line(e)}",
                           "check database_url, that the server is up and that this user may connect")
        return
    finally:
        if engine is not None:
            engine.dispose()
    version = int(row[0]) if row else None
    if version is None:
        yield Finding.warn("database", f"{where} has no gpuorch schema yet", "start the daemon once; it creates it")
    elif version > SCHEMA_VERSION:
        yield Finding.fail("database", f"{where} has schema {version}, newer than this gpuorch ({SCHEMA_VERSION})",
                           "upgrade gpuorch on this host to the version the daemon runs")
    elif version < SCHEMA_VERSION:
        yield Finding.warn("database", f"{where} has schema {version}; this gpuorch migrates it to {SCHEMA_VERSION}",
                           "restart the daemon after upgrading: it migrates on start")
    else:
        yield Finding.ok("database", f"{where}: schema {version}" + (f", journal {mode}" if mode else ""))
    if path is not None and mode is not None and str(mode).lower() != "wal":
        yield Finding.fail("database", f"{path} is in journal mode {mode}, not WAL (readers would block the daemon)",
                           f"stop the daemon, then: sqlite3 {path} 'PRAGMA journal_mode=WAL'")


def _first_line(e: Exception) -> str:
    lines = str(e).strip().splitlines()
    return lines[0] if lines else ""


# -- checkpoint stores -----------------------------------------------------------------------
def check_object_stores(ctx: Context) -> Iterator[Finding]:
    """Each checkpoint store a queued or running job uses: can this host open and reach it?

    Instances reach the store with their own cloud identity; this checks the control host's
    view (the local provider's instances share it).
    """
    if ctx.config is None:
        return
    urls = _stores_in_use(ctx.config.url)
    if urls is None:
        return
    if not urls:
        yield Finding.ok("object stores", "no queued or running job uses a checkpoint store")
        return
    for url, jobs in sorted(urls.items(), key=lambda item: item[0].raw):
        yield _probe_store(url, jobs)


def _stores_in_use(db_url: str) -> dict[StoreUrl, list[int]] | None:
    from sqlmodel import Session, col, select

    from gpuorch.jobs.spec import JobSpec
    from gpuorch.store.models import Job, JobStatus

    path = sqlite_path(db_url)
    if path is not None and not path.exists():
        return None
    engine = None
    try:
        engine = read_only_engine(db_url)
        with Session(engine) as s:
            live = col(Job.status).not_in([st.value for st in JobStatus if st.terminal])
            rows = list(s.exec(select(Job).where(live)))
    except Exception:  # the database check reports why
        return None
    finally:
        if engine is not None:
            engine.dispose()
    found: dict[StoreUrl, list[int]] = {}
    for job in rows:
        try:
            spec = JobSpec.model_validate_json(job.spec)
        except ValueError:  # unreadable: the daemon quarantines it (check_quarantine lists those)
            continue
        if spec.checkpoint is not None:
            found.setdefault(spec.checkpoint.url, []).append(job.id or 0)
    return found


def _probe_store(url: StoreUrl, jobs: list[int]) -> Finding:
    from gpuorch.checkpoint import UnsupportedStore, join_key, open_store

    who = f"jobs {', '.join(map(str, jobs))}" if len(jobs) > 1 else f"job {jobs[0]}"
    try:
        store, prefix = open_store(url)
        store.exists(join_key(prefix, ".gpuorch-doctor"))  # one HEAD-like request: reachable, and allowed
    except UnsupportedStore as e:
        return Finding.fail("object stores", f"{url} ({who}): {e}", "install the extra named above on this host")
    except (OSError, ValueError) as e:
        return Finding.fail("object stores", f"{url} ({who}): unreachable: {type(e).__name__}: {_first_line(e)}",
                            "check the URL, the network and this host's credentials for that store")
    root = getattr(store, "root", None)  # a file:// store: the instances on this host write there
    if isinstance(root, Path):
        existing = next((p for p in (root, *root.parents) if p.exists()), None)
        if existing is None or not os.access(existing, os.W_OK):
            return Finding.fail("object stores", f"{url} ({who}): {existing} is not writable by this user",
                                f"chown the directory to the daemon's user, or choose another store; under systemd "
                                f"add ReadWritePaths={root}")
    return Finding.ok("object stores", f"{url} ({who}): reachable")


# -- quarantined rows ------------------------------------------------------------------------
def check_quarantine(ctx: Context) -> Iterator[Finding]:
    """Jobs the daemon failed because their stored spec cannot be loaded (``store.quarantine``),
    and live ones whose spec this gpuorch cannot load (the daemon will quarantine them)."""
    if ctx.config is None:
        return
    yield from quarantined_findings(ctx.config.url)


def quarantined_findings(db_url: str) -> list[Finding]:
    from sqlmodel import Session, col, select

    from gpuorch.jobs.spec import JobSpec
    from gpuorch.store.models import Event, Job, JobStatus
    from gpuorch.store.quarantine import KIND

    path = sqlite_path(db_url)
    if path is not None and not path.exists():
        return []
    engine = None
    try:
        engine = read_only_engine(db_url)
        with Session(engine) as s:
            done = list(s.exec(select(Event).where(Event.kind == KIND).order_by(col(Event.id))))
            live = col(Job.status).not_in([st.value for st in JobStatus if st.terminal])
            unread = []
            for job in s.exec(select(Job).where(live)):
                try:
                    JobSpec.model_validate_json(job.spec)
                except ValueError:
                    unread.append(job.id)
    except Exception:  # the database check reports why
        return []
    finally:
        if engine is not None:
            engine.dispose()
    out = [Finding.warn("quarantine", f"job {e.job_id}: {e.message}",
                        f"resubmit it (`gpuorch status {e.job_id}` shows it); its row stays as a record")
           for e in done]
    if unread:
        out.append(Finding.warn("quarantine", f"jobs {', '.join(map(str, unread))}: stored spec cannot be read by "
                                "this gpuorch; the daemon fails them on its next pass",
                                "run the gpuorch version that stored them, or resubmit them"))
    return out or [Finding.ok("quarantine", "no job row is unreadable")]


# -- file modes ------------------------------------------------------------------------------
def check_file_modes(ctx: Context) -> Iterator[Finding]:
    """The state directory, the SQLite database and the mirrored logs hold job env values and
    job output: anything wider than 0700/0600 lets other users of this host read them."""
    if ctx.config is None:
        return
    yield from mode_findings(ctx.config.home, sqlite_path(ctx.config.url))


SHARED_GROUP = "gpuorch"


def _group_name(gid: int) -> str | None:
    import grp

    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return None


def mode_findings(home: Path, db: Path | None) -> list[Finding]:
    paths = [home, home / "logs"] + ([db, Path(f"{db}-wal"), Path(f"{db}-shm")] if db is not None else [])
    wide = []
    for p in paths:
        try:
            st = p.stat()
        except OSError:
            continue
        mode = stat.S_IMODE(st.st_mode)
        # The systemd unit shares the state with the gpuorch group (StateDirectoryMode=0770,
        # UMask=0007) so its members can run the CLI: group access is that group's only.
        allowed = 0o070 if _group_name(st.st_gid) == SHARED_GROUP else 0
        if mode & 0o077 & ~allowed:
            wide.append(f"{p} is {mode:04o}")
    if not wide:
        return [Finding.ok("file modes", f"{home} and the database are private to their owner")]
    return [Finding.warn("file modes", "; ".join(wide) + " (other users may read job env values and logs)",
                         f"chmod -R go-rwx {home}" + (f" {db.parent}" if db is not None and home not in db.parents
                                                      else ""))]
