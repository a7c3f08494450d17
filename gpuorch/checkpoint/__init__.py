"""Checkpoint storage for gpuorch: the ObjectStore port, the store registry (``gpuorch.stores``
entry points), the typed store URL and the checkpoint sync protocol.

Stdlib only (Python 3.8+): shipped to cloud instances with the agent. See docs/checkpoints.md.
"""

from gpuorch.checkpoint.handoff import FinalRecord, read_final, wait_for_final, write_final
from gpuorch.checkpoint.local import (
    COMPLETE,
    LocalCheckpoint,
    Order,
    complete_checkpoints,
    newest_checkpoint,
    read_checkpoint,
)
from gpuorch.checkpoint.manifest import CheckpointError, CorruptCheckpoint, FileEntry, Manifest
from gpuorch.checkpoint.namespace import (
    Owner,
    RecordedCheckpoint,
    job_prefix,
    legacy_job_prefix,
    legacy_refusal,
    refusal,
)
from gpuorch.checkpoint.registry import STORE_PLUGINS
from gpuorch.checkpoint.store import (
    ObjectNotFound,
    ObjectStore,
    UnsupportedStore,
    join_key,
    open_store,
    schemes,
    store_class,
    store_provider,
)
from gpuorch.checkpoint.sync import (
    CheckpointVanished,
    IncompleteCheckpoint,
    download,
    latest,
    list_manifests,
    prune,
    upload,
)
from gpuorch.checkpoint.url import StoreUrl

__all__ = [
    "COMPLETE",
    "STORE_PLUGINS",
    "CheckpointError",
    "CheckpointVanished",
    "CorruptCheckpoint",
    "FileEntry",
    "FinalRecord",
    "IncompleteCheckpoint",
    "LocalCheckpoint",
    "Manifest",
    "Order",
    "Owner",
    "RecordedCheckpoint",
    "StoreUrl",
    "ObjectNotFound",
    "ObjectStore",
    "UnsupportedStore",
    "complete_checkpoints",
    "download",
    "job_prefix",
    "join_key",
    "latest",
    "legacy_job_prefix",
    "legacy_refusal",
    "list_manifests",
    "newest_checkpoint",
    "open_store",
    "prune",
    "read_checkpoint",
    "read_final",
    "refusal",
    "schemes",
    "store_class",
    "store_provider",
    "upload",
    "wait_for_final",
    "write_final",
]
