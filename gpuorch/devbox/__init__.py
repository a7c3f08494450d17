"""Interactive dev boxes (docs/dev-boxes.md): ``gpuorch dev``, ``gpuorch ssh``, ``gpuorch port``.

A dev box is a job of ``kind: dev`` whose command (``keepalive``) keeps the instance up and
reports its activity (open SSH sessions, GPU utilisation) as metrics; the daemon stops it after
``idle_stop`` of inactivity (``reconciler/decide/limits.py``). ``remote`` finds the SSH endpoint
of a running job or box through its provider's runner (the daemon's keys and pinned host keys),
``forward`` carries a local TCP port to one on the box.
"""
