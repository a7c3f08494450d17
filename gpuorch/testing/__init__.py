"""Test kits that ship with gpuorch, for its own tests and for third-party adapters.

``ProviderContract`` is the shared provider contract suite (subclass it in a test module);
``wait_until`` polls a condition with a real or fake clock. Requires pytest.
"""

from .contract import ProviderContract, SupportsCapacityControl, wait_until

__all__ = ["ProviderContract", "SupportsCapacityControl", "wait_until"]
