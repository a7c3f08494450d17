"""The decide stage: from one job's ``JobView`` to actions. Pure: no store, provider, runner or
I/O (``job.py`` runs the sub-steps of ``attempt_steps.py``, ``gates.py`` and ``deadline.py``;
``actions.py`` is what they return)."""
