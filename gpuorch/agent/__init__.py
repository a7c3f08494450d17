"""The on-instance agent (``python -m gpuorch.agent RUNDIR``) and its contract with the daemon.

Stdlib only (Python 3.8+): this package and ``gpuorch.checkpoint`` are copied to instances as-is,
with the adapters' stores and notice pollers (``gpuorch.runners.bundle``).
Kept import-free so the daemon can import ``gpuorch.agent.protocol`` without the agent's code.
"""
