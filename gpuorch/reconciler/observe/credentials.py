"""``provider.credentials_failed`` outside a launch: a provider that refuses the daemon's
credentials (``AuthError``) while its offers or instances are listed, a runner is started, an
agent's status is read (``status_reads``), or its catalog is refreshed is told as a launch
refused for them is (``apply.launching``), once per
provider in ``REPEAT_S``.

A refused key fails every pass (every few seconds) until a person mends it, so the event is
recorded at most once per provider in that window, not once a pass: this process remembers when
it last recorded one, and before recording a new one looks in the store for one already there
(a launch's, or an earlier daemon life's). The event and its outbox row are written in one
transaction (``jobs.events.record``): a crash leaves both or neither, never an event nobody is told.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from sqlmodel import col, select

from gpuorch.errors import AuthError
from gpuorch.jobs import events
from gpuorch.notify.outbox import REPEAT_S
from gpuorch.store import Store
from gpuorch.store.models import Event

log = logging.getLogger("gpuorch.reconciler")

KIND = "credentials_failed"  # the event kind notify.kinds maps to provider.credentials_failed


class CredentialAlarm:
    """Records ``credentials_failed`` for a provider that refused its credentials, at most once
    per provider in ``REPEAT_S`` (``refused``). Safe from several threads (the pass, the
    catalog refresh's thread): a lock guards what it remembers; the store serialises the writes."""

    def __init__(self, store: Store, now: Callable[[], datetime]) -> None:
        self.store, self.now = store, now
        self._told: dict[str, datetime] = {}  # provider -> when its last event was recorded (or found)
        self._lock = threading.Lock()

    def refused(self, provider: str, doing: str, error: AuthError) -> bool:
        """Tell that ``provider`` refused the daemon's credentials while ``doing`` (a few words:
        "listing instances"), unless it was told in the last ``REPEAT_S``. True when an event was
        recorded now. A store that cannot be written is logged: the next refusal tries again."""
        now = self.now()
        with self._lock:
            last = self._told.get(provider)
            if last is not None and (now - last).total_seconds() < REPEAT_S:
                return False
            try:
                recorded = self._record(provider, doing, error, now)
            except Exception as e:  # the store is down: said once here; the refusal itself was logged
                log.warning("cannot record that %s refused the credentials: %s", provider, e)
                return False
        return recorded

    def _record(self, provider: str, doing: str, error: AuthError, now: datetime) -> bool:
        since = now - timedelta(seconds=REPEAT_S)
        with self.store.write() as s:
            earlier = s.exec(select(Event.ts, Event.data).where(
                col(Event.ts) > since, col(Event.ts) <= now, Event.kind == KIND)).all()
            seen = [ts for ts, data in earlier if json.loads(data or "{}").get("provider") == provider]
            if seen:  # a launch, or an earlier life, recorded it within the window
                self._told[provider] = max(seen)
                return False
            message = f"{provider}: {doing} refused: {' '.join(str(error).split())}"
            events.record(s, now, KIND, message, provider=provider, doing=doing)
        self._told[provider] = now
        return True
