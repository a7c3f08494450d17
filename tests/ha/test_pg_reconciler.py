"""The reconciler's core suite (tests/core/test_reconciler.py), run again on PostgreSQL.

The test functions and their fixtures are imported from that module; ``store`` resolves to the
PostgreSQL store of this directory's conftest, so every scenario runs unchanged on the HA store.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_path = Path(__file__).resolve().parents[1] / "core" / "test_reconciler.py"
_spec = importlib.util.spec_from_file_location("_core_reconciler_suite", _path)
_core = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_core)
globals().update({k: v for k, v in vars(_core).items() if k.startswith("test_") or k in ("fake", "rec")})

pytestmark = pytest.mark.postgres
