"""Spot drops after a drop: the calibration of ``gpuorch.policy.recovery.RECENT_EXTRA_PER_H``.

    python bench/zone_hazard.py [--window-h 1.0] [--data ../shared/data/spot-traces]

For each set of real spot availability traces (``aws-p3-2023``: 9 zones, the calibration set;
``aws-v100-2023-04``: 4 zones, held out), the drops per hour of available capacity: in the
``--window-h`` after the zone's last drop (a market that just preempted a job, with capacity back),
and at any time (placement's rate for the ``>20%`` bucket, 0.30/h, is the p3 set's). A tick whose
predecessor had capacity is an hour-fraction up; a 1 -> 0 step is a drop.

Prints a line per set, then one JSON object on its last line: per set ``recent_per_h``,
``all_per_h``, ``extra_per_h`` (their difference) and the counts.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SETS = ("aws-p3-2023", "aws-v100-2023-04")


def hazard(series: list[int], gap_h: float, window_h: float) -> tuple[float, int, float, int]:
    """(hours up within ``window_h`` after a drop, drops there, hours up in all, drops in all)."""
    up_recent = up_all = 0.0
    drops_recent = drops_all = 0
    last: int | None = None
    for i in range(1, len(series)):
        if series[i - 1] == 0:
            continue
        drop = series[i] == 0
        up_all += gap_h
        drops_all += drop
        if last is not None and (i - 1 - last) * gap_h < window_h:
            up_recent += gap_h
            drops_recent += drop
        if drop:
            last = i
    return up_recent, drops_recent, up_all, drops_all


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--window-h", type=float, default=1.0, help="hours after a drop that count as recent")
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data" / "spot-traces")
    args = ap.parse_args()
    out: dict[str, dict] = {}
    for name in SETS:
        totals = [0.0, 0, 0.0, 0]
        for path in sorted((args.data / name).glob("*.json")):
            doc = json.loads(path.read_text())
            got = hazard([int(x) for x in doc["data"]], doc["metadata"]["gap_seconds"] / 3600, args.window_h)
            totals = [a + b for a, b in zip(totals, got, strict=True)]
        up_recent, drops_recent, up_all, drops_all = totals
        recent, every = drops_recent / up_recent, drops_all / up_all
        out[name] = {"recent_per_h": round(recent, 3), "all_per_h": round(every, 3),
                     "extra_per_h": round(recent - every, 3), "recent_drops": int(drops_recent),
                     "recent_up_h": round(up_recent, 1), "drops": int(drops_all), "up_h": round(up_all, 1)}
        print(f"{name}: {recent:.3f} drops/h in the {args.window_h:g} h after a drop ({drops_recent:.0f} in "
              f"{up_recent:.0f} h up), {every:.3f}/h at any time ({drops_all:.0f} in {up_all:.0f} h): "
              f"+{recent - every:.3f}/h")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
