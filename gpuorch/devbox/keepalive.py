"""What runs on a dev box: the command that keeps it up and reports its activity, and the
wrapper that marks an SSH session open while it lasts.

The box's command (``keepalive_command``) runs under the agent like any job's and never exits on
its own. Every ``DEVBOX_TICK_S`` seconds (default 30) it appends one metrics line,
``{"devbox_at": epoch, "gpu_util": percent, "ssh_sessions": n, "idle_s": seconds}``, to
``$GPUORCH_METRICS_FILE``; the daemon keeps the latest values on the job (``status`` shows them)
and stops the box once ``idle_s`` plus the time since that line reaches ``idle_stop``.

- ``gpu_util``: the busiest GPU's utilisation (``nvidia-smi``); where ``DEVBOX_GPU_UTIL_FILE``
  names a file, its number instead (hosts without a GPU, and tests: a fake utilisation feed);
  0 where neither answers.
- ``ssh_sessions``: the sessions ``gpuorch ssh`` and ``gpuorch port`` hold open. Each one creates
  ``<run dir>/sessions/<pid>`` (``session_command``) with the pid of its remote shell; a marker
  whose process is gone is removed, so a dropped connection ends its session. (Counting sshd
  connections would not do: the daemon's runner holds one to the box all the time.)
- ``idle_s``: 0 while a session is open or a GPU is at or above the spec's ``idle_gpu_util``,
  else the seconds since that was last so (on the box's own clock: only differences are taken).
"""

from __future__ import annotations

import shlex

SESSIONS_DIR = "sessions"  # under the attempt's run dir
DEFAULT_TICK_S = 30

_SCRIPT = r"""# gpuorch dev box: keeps the instance up and reports its activity (gpuorch.devbox.keepalive)
tick="${DEVBOX_TICK_S:-%(tick)d}"
sessions="$(dirname "$GPUORCH_METRICS_FILE")/%(sessions)s"
mkdir -p "$sessions"
idle=0
last=$(date +%%s)
while :; do
  now=$(date +%%s)
  n=0
  for f in "$sessions"/*; do
    [ -e "$f" ] || continue
    if kill -0 "${f##*/}" 2>/dev/null; then n=$((n + 1)); else rm -f "$f"; fi
  done
  raw=0
  if [ -n "$DEVBOX_GPU_UTIL_FILE" ]; then
    raw=$(head -c 64 "$DEVBOX_GPU_UTIL_FILE" 2>/dev/null)
  elif command -v nvidia-smi >/dev/null 2>&1; then
    raw=$(nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits 2>/dev/null | sort -n | tail -n 1)
  fi
  util=$(awk -v u="$raw" 'BEGIN { u += 0; if (u < 0) u = 0; if (u > 100) u = 100; printf "%%g", u }')
  busy=$(awk -v u="$util" -v t="%(threshold)s" 'BEGIN { print (u + 0 >= t + 0) ? 1 : 0 }')
  if [ "$n" -gt 0 ] || [ "$busy" = 1 ]; then idle=0; else idle=$((idle + now - last)); fi
  last=$now
  printf '{"devbox_at": %%s, "gpu_util": %%s, "ssh_sessions": %%s, "idle_s": %%s}\n' \
    "$now" "$util" "$n" "$idle" >> "$GPUORCH_METRICS_FILE"
  sleep "$tick" & wait $!
done
"""


def keepalive_command(idle_gpu_util: float, tick_s: int = DEFAULT_TICK_S) -> str:
    """The dev box's ``run``: a bash loop (no Python needed on the box) that reports activity
    every ``tick_s`` seconds; a GPU at or above ``idle_gpu_util`` percent counts as in use."""
    return _SCRIPT % {"tick": max(1, int(tick_s)), "sessions": SESSIONS_DIR, "threshold": f"{idle_gpu_util:g}"}


def session_command(run_dir: str, work_dir: str, command: str | None) -> str:
    """A remote command line (for ``sh -c`` on the box) that marks a session open under
    ``run_dir`` for as long as its process lives, changes to ``work_dir`` (the job's working
    directory) and runs ``command``, or the login shell when None. ``exec`` keeps the marked pid
    the session's own until it ends. The marker and the ``cd`` are best effort, so a shell in a
    job's container still opens where its image has no ``mkdir`` (a dev box's keepalive makes the
    markers' directory itself); ``true``, not ``:``, takes the redirection: a special builtin's
    failed redirection ends a POSIX shell (dash, busybox)."""
    marker = shlex.quote(f"{run_dir}/{SESSIONS_DIR}")
    then = f"exec /bin/sh -c {shlex.quote(command)}" if command is not None else 'exec "${SHELL:-/bin/sh}" -l'
    return (f"{{ [ -d {marker} ] || mkdir -p {marker}; true > {marker}/$$; }} 2>/dev/null; "
            f"cd {shlex.quote(work_dir)} 2>/dev/null; {then}")
