"""Notifications (docs/notifications.md): the outbox the event log fills (``kinds``, in
``jobs.events``), the sender that drains it at least once (``sender``, started by the daemon),
signed webhooks and apprise channels (``routes``), and the morning report (``report``)."""
