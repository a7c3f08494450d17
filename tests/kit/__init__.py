"""Helpers several test folders share that have no place in ``gpuorch.testing`` (which ships with the
package for adapter authors): import them as ``tests.kit.<module>``."""
