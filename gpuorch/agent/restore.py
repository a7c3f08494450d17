"""Which stored checkpoints and records this attempt may use: only its own job's.

The agent restores from its job's prefix (``<store>/<installation>/<name>-<id>/``) the
manifests that name this installation and job (``namespace.refusal``), then, for a job stored
before namespacing, from its old prefix the checkpoints the daemon recorded for it
(``namespace.legacy_refusal``). Everything else is refused and listed, one line each, in
``AgentStatus.refused``: the daemon turns those lines into job events.
"""

from __future__ import annotations

import logging
from typing import List, Optional, Tuple

from gpuorch.agent.protocol import AgentConfig
from gpuorch.checkpoint import Manifest, ObjectStore, list_manifests, open_store
from gpuorch.checkpoint.handoff import CompletedRecord, read_completed
from gpuorch.checkpoint.namespace import Owner, RecordedCheckpoint, legacy_refusal, record_refusal, refusal

log = logging.getLogger("gpuorch.agent")

MAX_REFUSALS = 10  # lines kept in status.json; the rest are counted
Candidate = Tuple[ObjectStore, str, Manifest]  # where a checkpoint lives (store, prefix) and its manifest


class Restorer:
    """The attempt's view of the store: its own checkpoints, newest first, and what it refused."""

    def __init__(self, config: AgentConfig, store: ObjectStore, prefix: str) -> None:
        self.store, self.prefix = store, prefix
        self.owner = Owner(config.installation, config.job_id, config.attempt, config.job_name)
        self.legacy: Optional[Tuple[ObjectStore, str]] = None
        if config.legacy_checkpoint_url:
            self.legacy = open_store(config.legacy_checkpoint_url)
        self.recorded = [RecordedCheckpoint.from_dict(d) for d in config.legacy_checkpoints]
        self._refused: List[str] = []
        self._dropped = 0

    def refuse(self, why: str) -> None:
        log.warning("%s", why)
        if len(self._refused) < MAX_REFUSALS:
            self._refused.append(why)
        else:
            self._dropped += 1

    def refused(self) -> List[str]:
        """The refusals so far, for ``AgentStatus.refused``."""
        more = [f"... and {self._dropped} more refused (see the agent log)"] if self._dropped else []
        return self._refused + more

    def candidates(self) -> List[Candidate]:
        """The checkpoints this job may resume from, newest first: its own prefix's, then (a job
        stored before namespacing) the recorded ones under its old prefix. Refusals are noted."""
        own: List[Candidate] = []
        for m in reversed(list_manifests(self.store, self.prefix)):
            why = refusal(m, self.owner)
            if why is None:
                own.append((self.store, self.prefix, m))
            else:
                self.refuse(why)
        if self.legacy is None:
            return own
        store, prefix = self.legacy
        for m in reversed(list_manifests(store, prefix)):
            why = legacy_refusal(m, self.owner, self.recorded)
            if why is None:
                own.append((store, prefix, m))
            else:
                self.refuse(why)
        return own

    def completed(self) -> Optional[CompletedRecord]:
        """An earlier attempt's completion record of this job, if its prefix holds one. A job's
        old prefix is never read for it: a record there names no job it can be checked against."""
        done = read_completed(self.store, self.prefix)
        if done is None or done.attempt == self.owner.attempt:
            return None
        why = record_refusal(done.installation, done.job_id, self.owner,
                             f"the completion record of attempt {done.attempt}")
        if why is not None:
            self.refuse(why + "; running the job")
            return None
        return done
