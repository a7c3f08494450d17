"""Launches off the pass: a hung cloud call holds only its own job.

A GCP or Azure launch may wait minutes for its operation. The apply stage hands each job's
launch (its attempt rows are already committed: intent first) to a bounded pool and waits for
it; all of one pass's launches together wait at most ``wait_s`` (``new_pass``), so ten hung
launches cost a pass no more than one does. A launch still running then goes on in the background, and the passes
leave that job alone until it is over (its lease is renewed in bulk meanwhile, and its every
write still checks the lease). A fast launch, the usual case, completes within the pass as
before. The provider port's rule (``Provider.launch``): return quickly, or raise a "not yet"
error (a TransientError) and be called again with the same client token.

Launches that cannot block (capability ``launches_may_block`` False: local files) are made on the
pass's own thread: another thread would buy them nothing but contention, for the GIL and for
the store's write lock (a 10,000-job drain on the sim: one launch thread cost a tenth more CPU
than none, docs/benchmarks.md).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

log = logging.getLogger("gpuorch.reconciler")


class LaunchPool:
    def __init__(self, workers: int = 8, wait_s: float = 5.0) -> None:
        self.wait_s, self.workers = wait_s, workers
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gpuorch-launch")
        self._lock = threading.Lock()
        self._busy: dict[int, Future[object]] = {}  # job id -> its launch in flight
        self._settled: set[int] = set()  # jobs whose background launch ended since ``settled()``
        self._pass_deadline: float | None = None  # monotonic; None: each launch waits wait_s

    def new_pass(self) -> None:
        """A pass begins: its launches share one wait of at most ``wait_s``."""
        self._pass_deadline = time.monotonic() + self.wait_s

    def busy(self, job_id: int) -> bool:
        return job_id in self._busy  # one dict read, atomic under the GIL: no lock per job per pass

    def run(self, job_id: int, launch: Callable[[], object]) -> bool:
        """Run ``launch`` for the job; True if it finished within what is left of the pass's wait
        (its errors raised here), False if it goes on in the background (its errors are logged).
        What ``launch`` returns is ignored."""
        with self._lock:
            if job_id in self._busy:
                return False
            future = self._pool.submit(launch)
            self._busy[job_id] = future
        left = self.wait_s if self._pass_deadline is None else max(0.0, self._pass_deadline - time.monotonic())
        try:
            future.result(timeout=left)
        except FutureTimeout:
            if left > 0:  # it had time and did not finish; with none left (a queue drain) it is no news
                log.warning("job %s: launch still running after %.1fs; the pass goes on without it", job_id, left)
            else:
                log.debug("job %s: launch goes on in the background (the pass's launch wait is used up)", job_id)
            future.add_done_callback(lambda f: self._done((job_id,), f))
            return False
        except BaseException:
            self._forget(job_id)
            raise
        self._forget(job_id)
        return True

    def start(self, job_ids: Sequence[int], launch: Callable[[], object], may_block: bool = True) -> Future[object]:
        """Start ``launch``, the launches of a batch of jobs (none of them busy), on the pool: its
        jobs are busy until it ends. ``wait`` waits for it. Unless they ``may_block``, they are
        made here and now, the future returned done (its error, if any, raised by ``wait``)."""
        if not may_block:
            done: Future[object] = Future()
            try:
                done.set_result(launch())
            except Exception as e:
                done.set_exception(e)
            return done
        with self._lock:
            future = self._pool.submit(launch)
            for job_id in job_ids:
                self._busy[job_id] = future
        return future

    def wait(self, started: Sequence[tuple[Sequence[int], Future[object]]], block: bool = True) -> None:
        """Wait for batches ``start`` started, together, within what is left of the pass's wait
        (``block=False``: none); one still running then goes on in the background (its errors
        are logged, its jobs busy until it ends). Raises the first error of a batch that ended."""
        error: BaseException | None = None
        for job_ids, future in started:
            left = self.wait_s if self._pass_deadline is None else max(0.0, self._pass_deadline - time.monotonic())
            left = left if block else 0.0
            try:
                future.result(timeout=left)
            except FutureTimeout:
                log.debug("jobs %s..: %d launches go on in the background", job_ids[0], len(job_ids))
                future.add_done_callback(lambda f, ids=job_ids: self._done(ids, f))  # type: ignore[misc]
                continue
            except BaseException as e:
                error = error or e
            self._forget(*job_ids)
        if error is not None:
            raise error

    def _forget(self, *job_ids: int) -> None:
        with self._lock:
            for job_id in job_ids:
                self._busy.pop(job_id, None)

    def _done(self, job_ids: Sequence[int], f: Future[object]) -> None:
        if (e := f.exception()) is not None:
            log.error("job %s: background launch failed: %s", ", ".join(map(str, job_ids)), e, exc_info=e)
        with self._lock:
            for job_id in job_ids:
                self._busy.pop(job_id, None)
            self._settled.update(job_ids)

    def in_flight(self) -> set[int]:
        """Jobs whose launch is running now."""
        with self._lock:
            return set(self._busy)

    def stale(self) -> set[int]:
        """Jobs a background launch wrote (or may be writing) since the last call: their cached
        rows must be read again."""
        with self._lock:
            out, self._settled = self._settled | set(self._busy), set()
            return out

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
