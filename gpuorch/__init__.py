"""gpuorch: multi-cloud GPU provisioning and orchestration daemon."""

__version__ = "0.1.0"

# Set by the console script (gpuorch.console) before it imports gpuorch.cli, which then registers
# only the command named in argv. Here, not in console, so that cli need not import its caller.
_lazy_cli = False
