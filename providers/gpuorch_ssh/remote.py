"""The one program gpuorch runs on a pool host to check it: ``CHECK`` (Python 3.8+, stdlib only),
started as ``<python> -c CHECK`` with its input as JSON on stdin, so no value of ours or the
user's is ever part of a shell command line (the interpreter path is quoted).

It answers, as one JSON line on stdout:

- ``gpus``: ``[[name, MiB], ...]`` from ``nvidia-smi --query-gpu=name,memory.total
  --format=csv,noheader,nounits`` when asked (``detect``), or ``gpus_error``;
- ``cpus`` and ``memory_gib`` of the host;
- ``left``: for each instance to stop (``stop``: client tokens whose lease has ended), how many of
  its processes are still alive, and ``gone``: those with none left. Their directories (the
  agent's status and the job's log) stay ``keep_s`` after the stop, then go.
  An instance's processes are its agent (whose command line names its run directory) and every
  process in the agent's session or the job's (the job's process group is in ``status.json``).
  The first check sends SIGTERM (the agent then stops the job and takes its final checkpoint);
  one after ``grace_s`` sends SIGKILL.
"""

from __future__ import annotations

import json
import posixpath
import shlex
from typing import Any

CHECK = r'''
import json, os, shutil, signal, subprocess, sys, time
req = json.load(sys.stdin)
root = os.path.expanduser(req["root"])
out = {"cpus": os.cpu_count() or 0, "left": {}, "gone": []}
try:
    with open("/proc/meminfo") as f:
        kib = next(int(l.split()[1]) for l in f if l.startswith("MemTotal:"))
    out["memory_gib"] = round(kib / 1048576, 1)
except Exception:
    out["memory_gib"] = 0.0
if req.get("detect"):
    try:
        res = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=20)
        if res.returncode != 0:
            raise OSError((res.stderr or res.stdout).decode(errors="replace").strip()[-200:] or "failed")
        gpus = []
        for line in res.stdout.decode(errors="replace").splitlines():
            name, _, mib = line.rpartition(",")
            if name.strip():
                gpus.append([name.strip(), float(mib)])
        out["gpus"] = gpus
    except Exception as e:
        out["gpus_error"] = "nvidia-smi: %s" % (e,)
def procs():
    table = {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                args = f.read().split(b"\0")
            with open("/proc/%s/stat" % p) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            table[int(p)] = (args, int(fields[2]), int(fields[3]))
        except Exception:
            continue
    return table
def owned(table, home):
    run = os.path.join(home, "run").encode()
    agents = {pid for pid, (args, _, _) in table.items() if run in args}
    groups = set(agents)
    try:
        with open(os.path.join(home, "run", "status.json")) as f:
            job = json.load(f).get("pid")
        if isinstance(job, int) and job > 1:
            groups.add(job)
    except Exception:
        pass
    return [pid for pid, (_, pgid, sid) in sorted(table.items())
            if pid != os.getpid() and (pid in agents or pgid in groups or sid in groups)]
try:
    kept = [d for d in os.listdir(root) if os.path.exists(os.path.join(root, d, ".stop"))]
except OSError:
    kept = []
table = procs() if req["stop"] or kept else {}
now = time.time()
for token in req["stop"]:
    home = os.path.join(root, token)
    marker = os.path.join(home, ".stop")
    try:
        age, first = now - os.stat(marker).st_mtime, False
    except FileNotFoundError:
        os.makedirs(home, exist_ok=True)
        open(marker, "w").close()
        age, first = 0.0, True
    mine = owned(table, home)
    if not mine:
        out["gone"].append(token)
        continue
    out["left"][token] = len(mine)
    sig = signal.SIGTERM if first else signal.SIGKILL if age >= req["grace_s"] else None
    if sig is not None:
        for pid in mine:
            try:
                os.kill(pid, sig)
            except Exception:
                pass
for name in kept:  # an ended instance's files (status, log) stay keep_s for the daemon to read
    home = os.path.join(root, name)
    try:
        old = now - os.stat(os.path.join(home, ".stop")).st_mtime >= req["keep_s"]
    except OSError:
        continue
    if old and name not in req["stop"] and not owned(table, home):
        shutil.rmtree(home, ignore_errors=True)
print(json.dumps(out))
'''


def command(python: str) -> str:
    """The command line that runs ``CHECK`` (its input comes on stdin)."""
    return f"{shlex.quote(python)} -c {shlex.quote(CHECK)}"


def check_input(root: str, stop: list[str], grace_s: float, detect: bool, keep_s: float = 3600.0) -> bytes:
    return json.dumps({"root": posixpath.normpath(root) if root.startswith("/") else root, "stop": stop,
                       "grace_s": grace_s, "detect": detect, "keep_s": keep_s}).encode()


def parse_answer(output: str) -> dict[str, Any]:
    """The answer's JSON line (the last line: a login's rc files may print before it).
    ValueError if there is none."""
    for line in reversed(output.strip().splitlines()):
        if line.startswith("{"):
            answer = json.loads(line)
            if isinstance(answer, dict):
                return answer
    raise ValueError(f"no answer from the host check: {output.strip()[-300:]!r}")
