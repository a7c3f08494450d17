"""The sim's cloud side: reclaims and lifetime limits carried out on schedule, watched or not.

``settle`` brings one instance up to date with the market at a wall time: it announces a due
reclaim (``InstanceDir.announce``: the deadline in the record and ``notice.json`` for the agent),
kills the instance at the deadline, and ends it once ``LaunchRequest.max_lifetime_s`` has passed.
Everything it does follows from the record and the market, so calling it again, or from two
processes, changes nothing more. The provider settles what it reports; the cloud process
(``python -m gpuorch_sim.cloud HOME``, started detached on the first launch) settles every
instance on time while no daemon runs, as a real cloud reclaims a VM whether or not anyone is
watching. It exits once no instance has been alive for ``cloud_idle_exit_s``.
"""

from __future__ import annotations

import fcntl
import heapq
import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from gpuorch.agent.protocol import write_atomic
from gpuorch.errors import NotFoundError
from gpuorch.provider import InstanceState
from gpuorch.provider.localdir import InstanceDir, Meta, spawn_detached
from gpuorch.provider.localdir.instances import CHANGES_FILE
from gpuorch.provider.localdir.runner import SETTLE_S

from .market import Reclaim, SimClock, SimMarket, SimOptions

MARKET_FILE = "market.json"  # the options and the clock's origin: one timeline for every process
LOCK_FILE = "cloud.lock"  # held by the running cloud process; its pid inside
SPAWN_FILE = "cloud.spawn"  # flock'd around a spawn; its mtime is the last spawn's time
SPAWN_WAIT_S = 5.0
LOCK_TRIES = 20  # 1 s
TAG_LIFETIME = "gpuorch-sim:max-lifetime-s"
REASON_LIFETIME = "max-lifetime"
SCAN_S = 0.1
FULL_SCAN_S = 60.0  # the cloud process reads every record at least this often (else only what the change log names)


def _dt(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


# -- one timeline ------------------------------------------------------------------------------
def open_market(home: Path, options: SimOptions) -> SimMarket:
    """The market of ``home``: the same origin as before unless the options changed, in which
    case the replay starts over now (a new ``market.json``)."""
    home.mkdir(parents=True, exist_ok=True)
    wanted = options.model_dump(mode="json")
    try:
        saved = json.loads((home / MARKET_FILE).read_text())
        if saved.get("options") == wanted:
            return SimMarket(options, SimClock(float(saved["origin"]), options.start_s, options.time_scale))
    except (FileNotFoundError, ValueError, KeyError):
        pass
    origin = time.time()
    market = SimMarket(options, SimClock(origin, options.start_s, options.time_scale))  # validates first
    write_atomic(home / MARKET_FILE, json.dumps({"options": wanted, "origin": origin}, indent=1))
    return market


def load_market(home: Path) -> SimMarket:
    saved = json.loads((home / MARKET_FILE).read_text())
    options = SimOptions.model_validate(saved["options"])
    return SimMarket(options, SimClock(float(saved["origin"]), options.start_s, options.time_scale))


# -- one instance ------------------------------------------------------------------------------
def settle(inst: InstanceDir, meta: Meta, market: SimMarket, now: float, reclaim: Reclaim | None) -> Meta:
    """Apply what is due at ``now`` (wall epoch) to the instance; returns its record as observed.

    ``reclaim``: ``market.reclaim`` for a spot instance (None: on-demand, or never reclaimed).
    """
    at = _dt(now)
    m = meta.observed(at)
    if not m.state.alive:
        return m
    lifetime = m.tags.get(TAG_LIFETIME)
    if lifetime and now >= m.created_at.timestamp() + float(lifetime):
        return inst.end(InstanceState.TERMINATED, REASON_LIFETIME, _dt(m.created_at.timestamp() + float(lifetime)))
    if reclaim is not None and m.preemption_deadline is None:
        if reclaim.notice_at is not None and now >= reclaim.notice_at:
            m = inst.announce(_dt(reclaim.kill_at), at)
        elif reclaim.notice_at is None and now >= reclaim.kill_at:  # reclaimed without a word
            m = inst.update(lambda x: x.model_copy(update={"preemption_deadline": _dt(reclaim.kill_at)})).observed(at)
    if m.preemption_due(at):
        m = inst.observe(at)  # kills every process of the instance, records PREEMPTED
    return m


def next_event(meta: Meta, reclaim: Reclaim | None, now: float | None = None) -> float | None:
    """The wall time ``settle`` next has something to do for this record (None: never). The
    same at any ``now``: a boot (PENDING -> RUNNING) leaves the instance alive."""
    if not meta.state.alive:
        return None
    times = [meta.created_at.timestamp() + float(meta.tags[TAG_LIFETIME])] if TAG_LIFETIME in meta.tags else []
    if meta.preemption_deadline is not None:
        times.append(meta.preemption_deadline.timestamp())
    elif reclaim is not None:
        times.append(reclaim.notice_at if reclaim.notice_at is not None else reclaim.kill_at)
    return min(times, default=None)


# -- every instance, read only when it changed --------------------------------------------------
@dataclass
class _Seen:
    key: tuple[int, int, int]  # inode, mtime_ns, size of meta.json
    meta: Meta
    reclaim: Reclaim | None
    event: float | None = None  # next_event of this record
    settled: bool = True  # older than SETTLE_S when read: its key cannot hide a rewrite

    def observed(self, now: float) -> Meta:
        """``meta.observed`` at ``now``, without a copy per call: once booted, the record kept is
        the booted one (a boot is not written to meta.json, so the file's key stays the same)."""
        m = self.meta
        if m.state == InstanceState.PENDING and now >= m.ready_at.timestamp():
            m = self.meta = m.observed(_dt(now))
        return m

    def due(self) -> float | None:
        """The wall time from which this record, unwritten, may be observed otherwise: its boot
        (PENDING reads RUNNING at ``ready_at``) or ``event`` (None: never)."""
        boot = self.meta.ready_at.timestamp() if self.meta.state == InstanceState.PENDING else None
        return min((t for t in (boot, self.event) if t is not None), default=None)


class Scan:
    """What one reader of the records (a listing, the cloud process) looks at next: the records
    the change log names since its last look and those due by then, or every record every
    ``full_s`` (one written around the log) and whenever the log cannot tell."""

    def __init__(self, instances: Instances, full_s: float) -> None:
        self.instances, self.full_s = instances, full_s
        self._full_at: float | None = None
        self._due: list[tuple[float, str]] = []  # (due time, name), earliest first

    def take(self, now: float) -> set[str] | None:
        """The names to read at ``now`` (perhaps none); None: read every record (the caller
        forgets what it kept of them). Called before any record is read: a write after it is
        named next time."""
        changed = self.instances.changes()
        if changed is None or self._full_at is None or not 0 <= now - self._full_at < self.full_s:
            self._full_at, self._due = now, []
            return None
        while self._due and self._due[0][0] <= now:
            changed.add(heapq.heappop(self._due)[1])
        return changed

    def due_at(self, when: float | None, name: str) -> None:
        """Read ``name`` again from ``when`` (None: only when it is written)."""
        if when is not None:
            heapq.heappush(self._due, (when, name))

    def next_due(self) -> float | None:
        return self._due[0][0] if self._due else None


class SimInstanceDir(InstanceDir):
    """A sim instance's files, written atomically but not fsync'd: they stand for a cloud's
    records, which live on no control host's disk; a SIGKILL of the daemon or of this process
    (what the crash tests do) loses nothing, only a host crash could. An fsync per record cost a
    queue drain ~25 ms a launch on a loaded disk (docs/benchmarks.md, issue 18, session 6)."""

    durable = False
    indent = None


LOG_ROTATE_BYTES = 1 << 20  # the change log is started over (by a full listing) past this size


def make_change_log(root: Path) -> None:
    """Create ``root``'s change log if it has none (``InstanceDir.note_change`` writes only to
    an existing one)."""
    root.mkdir(parents=True, exist_ok=True)
    os.close(os.open(root / CHANGES_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644))


class Instances:
    """The instance records under ``root``, each parsed again only when its file changed.

    ``changes`` reads the change log (``gpuorch.provider.localdir.instances``): which records
    were written since it last looked, so a listing need not look at the others."""

    def __init__(self, root: Path, market: SimMarket) -> None:
        self.root, self.market = root, market
        self._seen: dict[str, _Seen] = {}
        self._dirs: dict[str, InstanceDir] = {}
        self._log: tuple[int, int] | None = None  # (inode, offset) of the change log read so far

    def changes(self) -> set[str] | None:
        """The names the change log gained since the last call: every record written meanwhile
        (by any process) is among them. None when that is not known (the first call, a log
        missing, started over or shorter than read): the caller reads every record, and the
        next call answers from here on. A line not yet complete is left for the next call; a
        name may be no instance's (the tail of a line, read after a start over): callers skip
        what they cannot read."""
        try:
            with open(self.root / CHANGES_FILE, "rb") as f:
                st = os.fstat(f.fileno())
                pos = self._log
                if pos is None or pos[0] != st.st_ino or st.st_size < pos[1]:
                    self._log = (st.st_ino, st.st_size)
                    return None
                if st.st_size == pos[1]:
                    return set()
                f.seek(pos[1])
                data = f.read(st.st_size - pos[1])
        except FileNotFoundError:
            self._log = None
            return None
        end = data.rfind(b"\n") + 1
        self._log = (pos[0], pos[1] + end)
        return {name for name in data[:end].decode(errors="replace").split("\n") if name}

    def rotate_log(self) -> None:
        """Start the change log over once it is long. Only right after ``changes`` answered None
        and before every record is read: a line left in the old log belongs to a record written
        before that read. Another reader holding an offset in the old log sees a new inode and
        reads every record once."""
        path = self.root / CHANGES_FILE
        try:
            if os.stat(path).st_size < LOG_ROTATE_BYTES:
                return
        except FileNotFoundError:
            return
        tmp = self.root / f"{CHANGES_FILE}.{os.getpid()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            ino = os.fstat(fd).st_ino
        finally:
            os.close(fd)
        os.replace(tmp, path)
        self._log = (ino, 0)

    def named(self, names: set[str]) -> Iterator[InstanceDir]:
        """The directories of these names (sorted; whether they exist is the reader's question)."""
        for name in sorted(names):
            if name.startswith(".") or "/" in name or not name:
                continue
            d = self._dirs.get(name)
            if d is None:
                d = self._dirs[name] = SimInstanceDir(self.root / name)
            yield d

    def seen(self, name: str) -> _Seen | None:
        return self._seen.get(name)

    def reclaim_of(self, meta: Meta) -> Reclaim | None:
        return self.market.reclaim(meta.offer.zone, meta.created_at.timestamp()) if meta.spot else None

    def read(self, inst: InstanceDir, fresh: bool = True) -> _Seen:
        """The record of one instance (NotFoundError if it has none). ``fresh=False``: the record
        kept while its key is the same, even one read less than SETTLE_S after its write (for a
        look whose answer may be a moment late anyway: ``settled``)."""
        try:
            st = os.stat(inst.meta_file)
        except FileNotFoundError:
            raise NotFoundError(f"sim instance {inst.id} not found") from None
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        seen = self._seen.get(inst.id)
        if seen is None or seen.key != key or (fresh and not seen.settled):
            # A record rewritten within the file system's timestamp tick, same size, on a reused
            # inode has the same key: one written less than SETTLE_S ago is always read again.
            meta = inst.read()
            reclaim = self.reclaim_of(meta)
            seen = self._seen[inst.id] = _Seen(key, meta, reclaim, next_event(meta, reclaim),
                                               settled=time.time() - st.st_mtime > SETTLE_S)
        return seen

    def settled(self, inst: InstanceDir, now: float, fresh: bool = True) -> tuple[Meta, _Seen]:
        """The record as observed at ``now`` after applying what is due, and what was read.
        ``fresh=False`` (``read``): for a caller that races a rewrite anyway (an external agent's
        start takes no lock), a stat and no parse of a record read just now (by this pass's listing)."""
        seen = self.read(inst) if fresh else self.read(inst, fresh=False)
        if seen.event is not None and now >= seen.event:
            meta = settle(inst, seen.meta, self.market, now, seen.reclaim)
            return meta, self.read(inst)
        return seen.observed(now), seen

    def all(self) -> Iterator[InstanceDir]:
        try:
            with os.scandir(self.root) as it:
                names = sorted(e.name for e in it if not e.name.startswith(".") and e.is_dir())
        except FileNotFoundError:
            return
        for name in names:
            d = self._dirs.get(name)
            if d is None:
                d = self._dirs[name] = SimInstanceDir(self.root / name)
            yield d


# -- the cloud process -------------------------------------------------------------------------
def cloud_running(home: Path) -> bool:
    """Whether a cloud process holds ``home``'s lock."""
    try:
        with open(home / LOCK_FILE, "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return False
    except BlockingIOError:
        return True


def ensure_cloud(home: Path) -> None:
    """Start the cloud process for ``home`` unless one runs or was started in the last
    ``SPAWN_WAIT_S`` (it takes a second to import and lock): a batch of launches on the launch
    pool's threads spawned one each, all but one of which exited at once."""
    if cloud_running(home):
        return
    with open(home / SPAWN_FILE, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # one spawner at a time: this daemon's threads, other daemons
        last = os.fstat(f.fileno())
        if last.st_size and time.time() - last.st_mtime < SPAWN_WAIT_S:
            return
        if not cloud_running(home):
            spawn_detached([sys.executable, "-m", "gpuorch_sim.cloud", str(home)], cwd=home,
                           log=home / "cloud.log", packages=("gpuorch_sim",))
            f.write(".")  # the mtime says when


def stop_cloud(home: Path) -> None:
    """SIGTERM the cloud process of ``home`` if one runs (tests, benchmarks); the next
    ``ensure_cloud`` may start one at once."""
    (home / SPAWN_FILE).unlink(missing_ok=True)
    try:
        pid = int((home / LOCK_FILE).read_text().strip() or 0)
    except (FileNotFoundError, ValueError):
        return
    if pid and cloud_running(home):
        try:
            os.kill(pid, 15)
        except ProcessLookupError:
            pass


def run(home: Path) -> int:
    lock = open(home / LOCK_FILE, "a+")  # noqa: SIM115 - held for the life of the process
    for _ in range(LOCK_TRIES):  # a `cloud_running` probe holds the lock for an instant: not a rival
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            time.sleep(0.05)
    else:
        return 0  # another cloud process runs this market
    lock.truncate(0)
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    market_mtime, idle_since = 0, time.time()
    alive: dict[str, bool] = {}  # by name, whether the record reads alive
    scan: Scan | None = None
    while True:
        mtime = (home / MARKET_FILE).stat().st_mtime_ns
        if scan is None or mtime != market_mtime:  # a daemon started a new replay
            market_mtime, scan = mtime, Scan(Instances(home / "instances", load_market(home)), FULL_SCAN_S)
        instances, now = scan.instances, time.time()
        dirs: Iterator[InstanceDir]
        if (names := scan.take(now)) is None:
            alive, dirs = {}, instances.all()
        else:
            dirs = instances.named(names)
        for inst in dirs:
            try:
                meta, seen = instances.settled(inst, now)
            except (NotFoundError, ValueError, OSError):
                alive.pop(inst.id, None)
                continue  # being created, or removed
            alive[inst.id] = meta.state.alive
            scan.due_at(seen.event, inst.id)
        idle_since = now if any(alive.values()) else idle_since
        if now - idle_since > instances.market.options.cloud_idle_exit_s:
            return 0
        # Wake for the next event; look at least every SCAN_S for instances launched meanwhile.
        wake = next_due if (next_due := scan.next_due()) is not None else now + 1.0
        time.sleep(min(max(wake - time.time(), 0.005), SCAN_S))


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m gpuorch_sim.cloud SIM_HOME", file=sys.stderr)
        return 2
    return run(Path(argv[0]))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
