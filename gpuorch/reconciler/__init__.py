"""The level-triggered reconciler, in stages: observe (a pure snapshot of each job, ``views.py``)
-> decide (pure sub-steps, ``decide.py``) -> apply (side effects, ``apply.py``; launches on a
bounded pool so one job's hung cloud call never holds the pass)."""

from gpuorch.reconciler.decide import Settings, decide
from gpuorch.reconciler.reconciler import Reconciler

__all__ = ["Reconciler", "Settings", "decide"]
