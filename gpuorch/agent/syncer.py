"""Uploads complete checkpoints in one background thread, one upload at a time.

The main loop only asks (``request``) and later checks (``done``), so a slow upload never keeps
it from noticing a preemption. Each pass uploads the newest complete local checkpoint if it is
newer than the last one uploaded (older ones in between would be pruned anyway), then prunes.
Requests made while a pass runs are coalesced into the next pass.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Callable

from gpuorch.checkpoint import (
    CheckpointVanished,
    LocalCheckpoint,
    Manifest,
    ObjectStore,
    Order,
    newest_checkpoint,
    prune,
    upload,
)
from gpuorch.checkpoint.namespace import Owner

log = logging.getLogger("gpuorch.agent")

OnUpload = Callable[[LocalCheckpoint, Manifest], None]


class Syncer:
    def __init__(
        self,
        store: ObjectStore,
        prefix: str,
        checkpoint_dir: Path,
        attempt: int,
        keep: int,
        on_upload: OnUpload,
        baseline: Order | None = None,
        owner: Owner | None = None,
    ) -> None:
        self.store, self.prefix, self.checkpoint_dir = store, prefix, checkpoint_dir
        self.attempt, self.keep, self.on_upload = attempt, keep, on_upload
        self.owner = owner  # named in each manifest (gpuorch.checkpoint.namespace)
        self._uploaded = baseline  # order key of the newest checkpoint known durable
        self._cv = threading.Condition()
        self._requested = 0  # tickets handed out
        self._finished = 0  # every ticket up to this one has had a full pass
        self.failed = False  # whether the latest pass raised (the caller may ask again)
        self._thread = threading.Thread(target=self._run, name="checkpoint-sync", daemon=True)
        self._thread.start()

    def request(self) -> int:
        """Ask for a pass; returns a ticket for ``done``/``wait``."""
        with self._cv:
            self._requested += 1
            self._cv.notify_all()
            return self._requested

    def done(self, ticket: int) -> bool:
        """Whether a pass that started after ``request`` returned ``ticket`` has finished."""
        with self._cv:
            return self._finished >= ticket

    def wait(self, ticket: int, timeout: float | None = None) -> bool:
        with self._cv:
            return self._cv.wait_for(lambda: self._finished >= ticket, timeout)

    def _run(self) -> None:
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self._requested > self._finished)
                target = self._requested
            failed = False
            try:
                self._pass()
            except Exception:  # keep the thread alive; the next pass retries
                log.exception("checkpoint sync failed; will retry at the next sync")
                failed = True
            with self._cv:
                self.failed = failed
                self._finished = target
                self._cv.notify_all()

    def _pass(self) -> None:
        newest = newest_checkpoint(self.checkpoint_dir)
        if newest is None or (self._uploaded is not None and newest.order <= self._uploaded):
            return
        try:
            manifest = upload(self.store, self.prefix, newest.path, self.attempt, self.owner)
        except CheckpointVanished as e:  # the job pruned it locally; a newer one exists
            log.info("skipped checkpoint %s: %s", newest.name, e)
            return
        self._uploaded = newest.order
        log.info("uploaded checkpoint %s (step %s, %d files)", newest.name, newest.step, len(manifest.files))
        self.on_upload(newest, manifest)
        pruned = prune(self.store, self.prefix, self.keep)
        if pruned:
            log.info("pruned %d old objects from the store", len(pruned))
