"""The daemon configuration's money options reach the reconciler's budget policy."""

from __future__ import annotations

import pytest

from gpuorch.errors import UserInputError
from gpuorch.ops.config_sources import load_config
from gpuorch.ops.daemon import build_reconciler


def test_daily_budget_and_stop_grace_reach_the_reconciler(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"home: {tmp_path}\nproviders: {{}}\ndaily_budget: 50\nbudget_stop_grace_s: 90\nmax_sleep_s: 10\n")
    rec = build_reconciler(load_config(cfg))
    policy = rec.money.policy
    assert (policy.daily_cap, policy.stop_grace_s, policy.decision_interval_s) == (50, 90, 60)
    assert policy.horizon_s == 2 * 60 + 90


def test_a_negative_daily_budget_is_refused(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text("daily_budget: -5\n")
    with pytest.raises(UserInputError, match="daily_budget"):
        load_config(cfg)
