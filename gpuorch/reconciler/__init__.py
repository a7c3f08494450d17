"""The level-triggered reconciler: decide (pure) and the pass that loads and applies."""

from .decide import Settings, decide
from .reconciler import Reconciler

__all__ = ["Reconciler", "Settings", "decide"]
