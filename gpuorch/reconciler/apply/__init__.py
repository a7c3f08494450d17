"""The apply stage: the side effects of a pass. ``applier.py`` carries out one job's decision,
with ``launching.py`` (intent first, then the provider call, on ``launch_pool.py``, a batch at a
time with ``batch_txn.py``) and ``recording.py`` (agent progress, checkpoints, ends); and the
pass's own writes: money and sweeps (``money.py``), volumes, orphans and SSH keys, the instance
mirror, log and metrics pulls, warnings of scheduled stops."""
