"""The agent's files (``agent.json``, ``status.json``) are what ``dataclasses.asdict`` would write:
``to_json`` only skips its deep copy. Nested dataclasses, lists, tuples and dicts included."""

from __future__ import annotations

import json
from dataclasses import asdict

from gpuorch.agent.container import ContainerConfig
from gpuorch.agent.protocol import AgentConfig, AgentStatus, NoticeSource


def test_an_agent_config_is_written_as_asdict_writes_it_and_read_back_equal():
    config = AgentConfig(job_id=7, attempt=2, job_name="j", run="python train.py", env={"A": "b", "N": "1"},
                         notice=NoticeSource(kind="file", path="/tmp/notice.json"),
                         container=ContainerConfig(image="ghcr.io/x/y:1", runtime=["podman"], run_args=["--ipc=host"]))
    for indent in (2, None):
        assert config.to_json(indent) == json.dumps(asdict(config), indent=indent, sort_keys=True)
    assert AgentConfig.from_json(config.to_json()) == config


def test_an_agent_status_is_written_as_asdict_writes_it():
    status = AgentStatus(state="running", uploaded=["step-1", "step-2"], result={"loss": [0.5, {"at": (1, 2)}]})
    assert status.to_json() == json.dumps(asdict(status), sort_keys=True)
    assert AgentStatus.from_json(status.to_json()).uploaded == ["step-1", "step-2"]
