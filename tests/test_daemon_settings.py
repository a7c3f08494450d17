"""The daemon's recovery settings: validated in the config, carried to the reconciler, the agents
(dead-man switch) and the launch requests (lifetime backstop)."""

from __future__ import annotations

import pytest

from gpuorch.errors import UserInputError
from gpuorch.ops.config import DaemonConfig
from gpuorch.ops.config_sources import load_config
from gpuorch.ops.daemon import build_reconciler


def test_defaults_turn_the_protections_on():
    cfg = DaemonConfig()
    assert cfg.recovery_strategy == "same-region-first"
    assert cfg.heartbeat_timeout_s == 600 and cfg.max_instance_lifetime_s == 7 * 24 * 3600


def test_settings_reach_the_reconciler(tmp_path):
    cfg = DaemonConfig(home=tmp_path, providers={"local": {}}, recovery_strategy="next-region-eagerly",
                       heartbeat_timeout_s=120, max_instance_lifetime_s=None, backoff_s=30)
    rec = build_reconciler(cfg)
    try:
        s = rec.settings
        assert (s.recovery_strategy, s.heartbeat_timeout_s, s.max_lifetime_s) == ("next-region-eagerly", 120, None)
        assert rec.backoff_s == 30
    finally:
        rec.store.close()


def test_an_unknown_strategy_names_the_field(tmp_path):
    p = tmp_path / "config.yaml"
    p.write_text("recovery_strategy: teleport\n")
    with pytest.raises(UserInputError, match=r"recovery_strategy: .*unknown recovery strategy 'teleport'"):
        load_config(p)


def test_the_metrics_wrapper_keeps_what_the_adapter_says_about_its_runner_and_launches(tmp_path):
    """Without it the daemon never read a reclaimed local/sim instance's last agent status, and
    a job that had finished was run again (found by the chaos test)."""
    from gpuorch.metrics.instrument import InstrumentedProvider
    from gpuorch_local import LocalProvider

    wrapped = InstrumentedProvider(LocalProvider(tmp_path / "local"), calls=None, errors=None)  # type: ignore[arg-type]
    declared = wrapped.capabilities
    assert declared.runner_outlives_instance is True
    assert declared.runners_may_block is False and declared.launches_may_block is False  # local files: in the pass
