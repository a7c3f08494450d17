"""The level-triggered reconciler: decide (pure) and the pass that loads and applies."""

from gpuorch.reconciler.decide import Settings, decide
from gpuorch.reconciler.reconciler import Reconciler

__all__ = ["Reconciler", "Settings", "decide"]
