"""The two programs gpuorch runs inside a pod: constant text, never formatted with a user value.

``BOOTSTRAP`` is the container's command (PID 1 in a real pod): it waits for the runner to place
the agent (``run/agent.json``, ``run/agent.pyz``), runs it, and stays up after it exits (the
daemon reads its final status, as from a VM) until one of:

- SIGTERM (a deletion, an eviction, a drain, a preemption: the kubelet's notice): it writes
  ``run/notice.json`` ``{"deadline": received + grace}``, which the agent reads as a preemption
  notice (``NoticeSource(kind="file")``): final checkpoint, hand-off, stop; then it exits;
- ``run/shutdown`` (the agent's dead-man switch ran its shutdown command): it exits, which ends
  the pod and frees its GPUs.

``PODIO`` moves files in and out through ``pods/exec`` (argv only, stdin for data): ``put`` (a tar
of the agent and the workdir, claimed once through a hard link of agent.json), ``read NAME OFFSET
LIMIT`` (exit 3: no such file), ``write NAME [--if-absent]`` (atomic). Names are the run dir's own.
Both are stdlib-only and run on Python 3.8+ (the image's ``python``).
"""

from __future__ import annotations

SHUTDOWN_COMMAND = 'touch "$GPUORCH_POD_SHUTDOWN"'  # run by the agent, with the env BOOTSTRAP set
MISSING = 3  # PODIO read: no such file

BOOTSTRAP = r"""
import json, os, signal, subprocess, sys, time
grace, python = float(sys.argv[1]), sys.argv[2]
run = os.path.abspath("run")
os.makedirs(run, exist_ok=True)
seen = {}
signal.signal(signal.SIGTERM, lambda *_: seen.setdefault("term", time.time()))
agent, noticed = None, False
while True:
    if "term" in seen and not noticed:
        tmp = os.path.join(run, ".notice.tmp")
        with open(tmp, "w") as f:
            json.dump({"deadline": seen["term"] + grace}, f)
        os.replace(tmp, os.path.join(run, "notice.json"))
        noticed = True
        if agent is None:
            sys.exit(0)
    if agent is None and os.path.exists(os.path.join(run, "agent.json")):
        env = dict(os.environ, GPUORCH_POD_SHUTDOWN=os.path.join(run, "shutdown"))
        with open(os.path.join(run, "agent.out"), "ab") as out:
            agent = subprocess.Popen([python, os.path.join(run, "agent.pyz"), run], stdin=subprocess.DEVNULL,
                                     stdout=out, stderr=subprocess.STDOUT, env=env)
    if agent is not None and agent.poll() is not None and (noticed or os.path.exists(os.path.join(run, "shutdown"))):
        sys.exit(0)
    time.sleep(0.2)
"""

PODIO = r"""
import io, os, shutil, sys, tarfile, tempfile
run = os.path.abspath("run")
os.makedirs(run, exist_ok=True)
mode = sys.argv[1]
def path(name):
    if name.startswith(".") or "/" in name or name not in ("agent.json", "status.json", "job.log", "heartbeat",
                                                           "stop.json", "metrics.jsonl", "agent.out"):
        sys.exit("not a run dir file: %r" % name)
    return os.path.join(run, name)
if mode == "exists":
    sys.exit(0 if os.path.exists(path(sys.argv[2])) else 3)
if mode == "read":
    try:
        with open(path(sys.argv[2]), "rb") as f:
            f.seek(int(sys.argv[3]))
            sys.stdout.buffer.write(f.read(int(sys.argv[4])))
    except FileNotFoundError:
        sys.exit(3)
    sys.exit(0)
if mode == "write":
    target = path(sys.argv[2])
    if "--if-absent" in sys.argv and os.path.exists(target):
        sys.exit(0)
    fd, tmp = tempfile.mkstemp(dir=run, prefix=".write.")
    with os.fdopen(fd, "wb") as f:
        f.write(sys.stdin.buffer.read())
    if "--if-absent" in sys.argv:
        try:
            os.link(tmp, target)
        except FileExistsError:
            pass
        os.unlink(tmp)
    else:
        os.replace(tmp, target)
    sys.exit(0)
if mode == "put":
    if os.path.exists(os.path.join(run, "agent.json")):
        sys.exit(0)
    stage = tempfile.mkdtemp(dir=run, prefix=".put.")
    with tarfile.open(fileobj=io.BytesIO(sys.stdin.buffer.read()), mode="r:gz") as tar:
        for m in tar.getmembers():
            parts = m.name.split("/")
            if m.name.startswith("/") or ".." in parts or not (m.isfile() or m.isdir() or m.issym()):
                sys.exit("refused archive member %r" % m.name)
            if m.issym() and (m.linkname.startswith("/") or ".." in m.linkname.split("/")):
                sys.exit("refused link %r" % m.name)
        tar.extractall(stage)
    os.makedirs(os.path.join(run, "work"), exist_ok=True)
    for name in os.listdir(os.path.join(stage, "work")) if os.path.isdir(os.path.join(stage, "work")) else []:
        os.replace(os.path.join(stage, "work", name), os.path.join(run, "work", name))
    os.replace(os.path.join(stage, "agent.pyz"), os.path.join(run, "agent.pyz"))
    try:
        os.link(os.path.join(stage, "agent.json"), os.path.join(run, "agent.json"))  # the claim: once
    except FileExistsError:
        pass
    shutil.rmtree(stage, ignore_errors=True)
    sys.exit(0)
sys.exit("unknown mode %r" % mode)
"""
