"""``python -m gpuorch.agent RUNDIR``: run one attempt; see ``gpuorch.agent.agent``.

Exits with the job's exit code, 64 on bad usage, 70 if the agent itself failed (then
``status.json`` says why: state ``failed`` and ``error``).
"""

from __future__ import annotations

import logging
import signal
import sys
import time
from pathlib import Path

from gpuorch.agent.agent import Agent, log
from gpuorch.agent.protocol import AGENT_LOG, CONFIG_FILE, STATUS_FILE, AgentConfig, AgentStatus, write_atomic

EXIT_USAGE = 64
EXIT_AGENT_FAILED = 70  # EX_SOFTWARE


def main(argv: list[str] | None = None) -> int:
    """Run the attempt in ``RUNDIR``; returns the exit status described above."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m gpuorch.agent RUNDIR", file=sys.stderr)
        return EXIT_USAGE
    rundir = Path(args[0]).resolve()
    log.setLevel(logging.INFO)
    agent: Agent | None = None
    try:
        handler = logging.FileHandler(rundir / AGENT_LOG)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(threadName)s %(message)s"))
        log.addHandler(handler)
        agent = running = Agent(rundir, AgentConfig.from_json((rundir / CONFIG_FILE).read_text()))
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: running.terminate.set())
        return running.run()
    except BaseException as e:  # never a silent death: say why in status.json
        log.exception("agent failed")
        error = f"{type(e).__name__}: {e}"
        try:
            if agent is not None:
                agent.kill_job()  # an unsupervised job would be a second, invisible copy
                agent.update(state="failed", error=error, ended_at=time.time())
            else:
                failed = AgentStatus(state="failed", error=error, ended_at=time.time(), updated_at=time.time())
                write_atomic(rundir / STATUS_FILE, failed.to_json())
        except Exception:
            log.exception("could not record the failure in %s", STATUS_FILE)
        return EXIT_AGENT_FAILED


if __name__ == "__main__":
    sys.exit(main())
