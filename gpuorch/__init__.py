"""gpuorch: multi-cloud GPU provisioning and orchestration daemon."""

__version__ = "0.1.0"
