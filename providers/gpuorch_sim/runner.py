"""The sim's runners: ``SimRunner`` (the local runner, and the job's volume as a directory) and,
for ``agents: external``, ``ExternalAgentRunner`` (benchmarks of the daemon alone).

``SimRunner``: a sim instance's processes run on this host, so a volume attached to it is not
mounted anywhere: the agent starts with ``GPUORCH_VOLUME_DIR`` (and the config's ``volume_dir``)
set to the volume's data directory (``volumes.SimVolumes``), not the spec's ``mount`` path, and
``<run>/volume`` links to it for a human looking at the run.

``ExternalAgentRunner``:

A thousand real agents need a thousand Python processes (~20 MB each); to measure the daemon
with that many running jobs on a small machine, ``start`` only writes ``agent.json`` and
something else (``bench/recovery.py``'s driver) plays the agent by writing ``status.json`` the
way the agent does. The daemon reads, heartbeats and mirrors logs exactly as with real agents.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuorch.agent.protocol import CONFIG_FILE, AgentConfig, write_atomic
from gpuorch.errors import NotFoundError
from gpuorch.provider import InstanceState, RunnerUnavailable
from gpuorch.provider.localdir import LocalRunner
from gpuorch.provider.localdir.runner import NOTICE_POLL_S
from gpuorch.runners.port import VolumeMountFailed, VolumeNotReady

from .volumes import SimVolumes, attached_dir

VOLUME_LINK = "volume"  # <run>/volume -> the attached volume's data directory


class SimRunner(LocalRunner):
    def __init__(self, instance_dir: Path, volumes: SimVolumes, **kw: Any) -> None:
        super().__init__(instance_dir, **kw)
        self.volumes = volumes

    def start(self, config: AgentConfig, workdir: Path | None = None) -> None:
        """``LocalRunner.start``, the job's volume (``config.volume_id``) given as its data directory.

        VolumeNotReady while the volume is not attached to this instance (the daemon attaches it
        before the start); VolumeMountFailed for a volume that does not exist."""
        if config.volume_id:
            where = config.volume_dir or ""
            try:
                data = attached_dir(self.volumes, config.volume_id, self.instance.id)
            except NotFoundError:
                raise VolumeMountFailed(config.volume_id, where, "no such sim volume") from None
            if data is None:
                raise VolumeNotReady(config.volume_id, where, f"not attached to {self.instance.id}")
            config = dataclasses.replace(config, volume_dir=str(data),
                                         env={**config.env, "GPUORCH_VOLUME_DIR": str(data)})
            super().start(config, workdir)
            link = self.rundir / VOLUME_LINK
            if not link.is_symlink():
                try:
                    os.symlink(data, link)
                except FileExistsError:  # a concurrent start made it
                    pass
            return
        super().start(config, workdir)


class ExternalAgentRunner(LocalRunner):
    """``state``: the instance's state as its provider settles it (``Instances.settled`` with
    ``fresh=False``: a ``stat`` of the record, no read while its key is the same; a preemption
    due carried out); None: read from the record (``InstanceDir.observe``)."""

    def __init__(self, instance_dir: Path, notice_poll_s: float = NOTICE_POLL_S,
                 state: Callable[[], InstanceState] | None = None) -> None:
        super().__init__(instance_dir, notice_poll_s)
        self._state = state or (lambda: self.instance.observe().state)

    def start(self, config: AgentConfig, workdir: Path | None = None) -> None:
        """Write ``agent.json`` once; start nothing. RunnerUnavailable unless RUNNING.

        No lock: ``LocalRunner.start`` holds the instance's so that a terminate cannot slip
        between its check and the agent's spawn, and so that two starts cannot spawn two agents;
        this start spawns nothing. A terminate that slips in leaves an ended instance with an
        ``agent.json`` (the next pass sees it ended); two starts write the file atomically, one
        after the other. The lock's open and ``flock`` and the record's read and parse were most
        of a start in a queue drain; the state comes from the provider's settled record."""
        try:
            state = self._state()
        except NotFoundError:
            raise RunnerUnavailable(f"sim instance {self.instance.id} is gone") from None
        if state != InstanceState.RUNNING:
            raise RunnerUnavailable(f"sim instance {self.instance.id} is {state}")
        try:  # a run directory made just now holds no agent.json: no look for one
            os.mkdir(self.rundir)
        except FileExistsError:
            if os.path.exists(self._path(CONFIG_FILE)):
                return
        # As the sim's records (not fsync'd); compact: an indent was a tenth of an agent start in
        # a queue drain.
        write_atomic(self._path(CONFIG_FILE), config.to_json(indent=None), durable=False)
