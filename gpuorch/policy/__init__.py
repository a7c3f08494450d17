"""Deadline-aware spot policies and the trace simulator that measures them.

Pure functions (only :mod:`gpuorch.policy.traces` reads files). The policies themselves are
plain Python, importable from here without numpy; the simulator, the optimum and the
evaluation use numpy and are imported from their modules:

- :mod:`~gpuorch.policy.model`: job, state, observation, action; the tick semantics.
- :mod:`~gpuorch.policy.simulator`: replay one online policy over one window.
- :mod:`~gpuorch.policy.baselines`: ``on-demand``, ``greedy``, ``uniform-progress``.
- :mod:`~gpuorch.policy.deadline`: ``gpuorch``, the policy the daemon uses.
- :mod:`~gpuorch.policy.optimal`: ``optimal``, the omniscient optimum by dynamic programming.
- :mod:`~gpuorch.policy.evaluate`: every policy over random windows, mean / P90 / misses.
"""

from gpuorch.policy.baselines import GreedyPolicy, OnDemandPolicy, UniformProgressPolicy
from gpuorch.policy.deadline import GpuorchPolicy
from gpuorch.policy.model import OD, ON_DEMAND, SPOT, Action, Job, Observation, Placement, Policy, State

__all__ = [
    "OD",
    "ON_DEMAND",
    "SPOT",
    "Action",
    "GpuorchPolicy",
    "GreedyPolicy",
    "Job",
    "Observation",
    "OnDemandPolicy",
    "Placement",
    "Policy",
    "State",
    "UniformProgressPolicy",
]
