"""The level-triggered reconciler: a pass (``reconciler.py``) drives three stages, each a package.
``observe/`` claims the jobs and takes a snapshot of each (``views.py``), ``decide/`` turns one
snapshot into actions (pure, ``job.py``), ``apply/`` carries them out (side effects; launches on
a bounded pool so one job's hung cloud call never holds the pass). ``memo.py`` (with ``steady.py``)
keeps the jobs whose inputs did not change since the last pass without viewing or deciding them."""

from gpuorch.reconciler.observe.views import Settings
from gpuorch.reconciler.reconciler import Reconciler

__all__ = ["Reconciler", "Settings"]
