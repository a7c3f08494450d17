"""The ``local`` provider: instances are isolated work directories and process groups on this host.

Registered as entry point ``local`` in group ``gpuorch.providers``. See docs/providers.md.
"""

from .provider import LocalProvider, instance_id_for
from .runner import LocalRunner

__all__ = ["LocalProvider", "LocalRunner", "instance_id_for"]
