"""The job the two-daemon test runs: note that this (job, attempt) ran, then wait for the go file.

Usage: ha_job.py RUNS_FILE GO_FILE. One O_APPEND write of a short line is atomic, so concurrent
jobs never interleave their lines.
"""

import os
import sys
import time

runs, go = sys.argv[1], sys.argv[2]
with open(runs, "a") as f:
    f.write(f"{os.environ['GPUORCH_JOB_ID']} {os.environ['GPUORCH_ATTEMPT']} {os.getpid()}\n")
while not os.path.exists(go):
    time.sleep(0.05)
