"""The money night's volume job (stdlib only): the gated job (``gated_job.py``) with its checkpoints
in the job's volume, so a later attempt resumes from what an earlier one left there.

It appends its attempt number to ``$GPUORCH_VOLUME_DIR/marks``, runs the gated job with
``GPUORCH_CHECKPOINT_DIR`` inside the volume, and once that exits 0 adds to its result the marks it
found in the volume and the directory it was given: an attempt that saw its predecessors' marks
ran on the same volume.
"""

import json
import os
import runpy
from pathlib import Path

volume = Path(os.environ["GPUORCH_VOLUME_DIR"])
with open(volume / "marks", "a") as f:
    f.write(os.environ["GPUORCH_ATTEMPT"] + "\n")
os.environ["GPUORCH_CHECKPOINT_DIR"] = str(volume / "ckpt")
runpy.run_path(str(Path(__file__).with_name("gated_job.py")), run_name="__main__")
result = Path(os.environ["GPUORCH_RESULT_FILE"])
data = json.loads(result.read_text())
data.update(marks=[int(m) for m in (volume / "marks").read_text().split()], volume_dir=str(volume))
result.write_text(json.dumps(data))
