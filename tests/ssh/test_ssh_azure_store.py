"""The agent on an "instance" (this host over SSH, run from its zipapp bundle) restoring from and
uploading to an az:// store: Azurite on 127.0.0.1, reached through the emulator connection
string handed to the agent (a real instance uses its managed identity instead)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from azurite import ACCOUNT, Azurite, AzuriteUnavailable
from ssh_harness import config, wait_status

from gpuorch.checkpoint import COMPLETE, latest, open_store, upload
from gpuorch.runners.ssh import SshRunner

pytestmark = pytest.mark.azure
Make = Callable[..., SshRunner]


@pytest.fixture(scope="module")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Azurite]:
    try:
        server = Azurite(tmp_path_factory.mktemp("azurite"))
    except AzuriteUnavailable as e:
        pytest.skip(f"no Azurite for the az:// store tests: {e}")
    yield server
    server.stop()


def test_the_agent_restores_from_and_uploads_to_an_az_store(make_runner: Make, azurite: Azurite, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch):
    for name, value in azurite.env.items():
        monkeypatch.setenv(name, value)  # for this process's view of the store
    url = f"az://{azurite.new_container()}@{ACCOUNT}/jobs/ft-1"
    store, prefix = open_store(url)
    d = tmp_path / "previous" / "step-1"
    d.mkdir(parents=True)
    (d / "state").write_text("41")
    (d / COMPLETE).write_text(json.dumps({"step": 1}))
    upload(store, prefix, d, attempt=1)

    job = ('test "$GPUORCH_RESUMED_FROM" = step-1; n=$(cat "$GPUORCH_CHECKPOINT_DIR/step-1/state"); '
           'd="$GPUORCH_CHECKPOINT_DIR/step-2"; mkdir "$d"; echo $((n + 1)) > "$d/state"; '
           'echo \'{"step": 2}\' > "$d/COMPLETE"')
    runner = make_runner(agent_env=azurite.env)
    runner.start(config(attempt=2, run=job, checkpoint_url=url, sync_interval_s=0.5))
    status = wait_status(runner, lambda s: s.state in ("exited", "failed"), timeout=20)
    assert (status.state, status.exit_code, status.restored_from, status.error) == ("exited", 0, "step-1", None)
    assert status.uploaded == ["step-2"]
    newest = latest(store, prefix)
    assert newest is not None and (newest.name, newest.step, newest.attempt) == ("step-2", 2, 2)
