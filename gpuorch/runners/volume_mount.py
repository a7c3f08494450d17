"""Mounting a job's volume on the instance before its agent starts (``mount_script``).

Why here, over SSH, and not in the user data: the volume of a job's first attempt is created
only once that attempt has an instance (its zone decides the volume's), so its id is not known
at launch; and the daemon attaches it to each attempt after boot. The runner, which connects
anyway to start the agent, runs one small idempotent ``/bin/sh`` script first: look for the
device, format it if (and only if) it is blank, mount it at ``volume.mount``. The script never
waits: the device of a volume attached moments ago may not be there yet, and the script then
says so (exit ``NOT_YET``) and the runner raises ``VolumeNotReady``; the reconciler runs the start
again on its next pass and gives up ``volume_wait_s`` after the attach (a daemon reconciling
many jobs must not sit in one of them). Any other failure is final (``VolumeMountFailed``, with
the script's one-line reason): the agent never runs without its volume.

Finding the device: on Nitro instances an EBS volume is an NVMe namespace whose controller's
serial is the volume id without its dash (``vol0123...``); udev links it as
``/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_vol0123...``. The device *name* the attach
call gave (``/dev/sdf``) means nothing there, and NVMe names (``nvme1n1``) follow probe order.
The script takes the by-id link, else scans ``/sys/block/nvme*/device/serial`` (images without
the EC2 udev rules). Xen-based types (p2, p3, g3) expose ``/dev/xvdf`` with no serial: not
supported (the script keeps saying the device is not there, until the daemon gives up).

GCP persistent disks (ids ``<zone>/<disk>``) are attached with the disk's name as device name,
which the guest's udev rules link as ``/dev/disk/by-id/google-<name>`` (and
``scsi-0Google_PersistentDisk_<name>``); the NVMe-only machine series (A3, A4) link it the same
way. Azure managed disks (ids: the disk's ARM resource id) are attached on the fixed LUN
``AZURE_LUN``, which Azure's udev rules link as ``/dev/disk/azure/scsi1/lun<N>`` (SCSI VMs) or
``/dev/disk/azure/data/by-lun/<N>`` (NVMe VMs).

Formatting: only a device on which ``blkid -p`` finds nothing (exit 2) *and* whose first MiB
reads as zeros (a new EBS volume) is formatted (ext4, no discard). A volume with a filesystem, a
partition table, or any data blkid does not recognise is never formatted: the script fails
instead. Mounting: nothing is done if the device is already mounted at the path (a second run
is a no-op); another device there is an error. A freshly formatted volume's root is given to
the login user, whom the job runs as.

Every path and id in the script is ``shlex.quote``d; the mount path must also be free of
whitespace and backslashes (``/proc/self/mounts`` escapes those). The block-device places and
root-only commands are parameters (``MountTools``) so tests can point them at stand-ins.
"""

from __future__ import annotations

import dataclasses
import re
import shlex

EBS_VOLUME_ID = re.compile(r"vol-[0-9a-f]{8,32}\Z")
EBS_BY_ID_PREFIX = "nvme-Amazon_Elastic_Block_Store_"
GCP_DISK_ID = re.compile(r"[a-z]+-[a-z]+\d{1,2}-[a-z]/(?P<name>[a-z]([-a-z0-9]{0,61}[a-z0-9])?)\Z")
AZURE_DISK_ID = re.compile(r"/subscriptions/[^/\s]+/resourceGroups/[^/\s]+/providers/Microsoft\.Compute/disks/"
                           r"[-\w.]{1,80}\Z", re.IGNORECASE)
AZURE_LUN = 0  # the LUN the Azure adapter attaches a job's volume on (its only data disk)
# Exit codes of the script, beyond 1 (an unexpected command failure under set -e). NOT_YET (the
# device is not there yet) is the only one worth another try; the others are final.
NOT_YET, MOUNT_POINT_BUSY, NOT_BLANK, CANNOT_PROBE = 3, 4, 5, 6
BLANK_CHECK_BYTES = 1 << 20


@dataclasses.dataclass(frozen=True)
class MountTools:
    """Where the script looks and what it runs. The defaults are an instance's real ones."""

    by_id_dir: str = "/dev/disk/by-id"
    azure_dir: str = "/dev/disk/azure"
    sys_block_dir: str = "/sys/block"
    dev_dir: str = "/dev"
    mounts_file: str = "/proc/self/mounts"
    sudo: tuple[str, ...] = ("sudo", "-n")  # used unless the login is root
    blkid: tuple[str, ...] = ("blkid",)
    mkfs: tuple[str, ...] = ("mkfs.ext4", "-q", "-E", "nodiscard,lazy_itable_init=1", "-L", "gpuorch")
    mount: tuple[str, ...] = ("mount", "-o", "noatime")


def check_mount_path(path: str) -> str:
    """``path`` if it can be a volume's mount point; ValueError naming the problem otherwise."""
    if not path.startswith("/") or path.rstrip("/") == "":
        raise ValueError(f"mount {path!r} must be an absolute path other than /, like /data")
    if re.search(r"[\s\\\x00-\x1f\x7f]", path):
        raise ValueError(f"mount {path!r} must not contain whitespace, backslashes or control characters")
    return path.rstrip("/")


def mount_script(volume_id: str, path: str, *, tools: MountTools | None = None) -> str:
    """The ``/bin/sh`` script that mounts volume ``volume_id`` (EBS, GCP or Azure) at ``path``.

    Pure. Looks once and never waits. Exits 0 once the volume is mounted there (also when it
    already was); ``NOT_YET`` when its device is not there (yet): run it again later; any other
    non-zero exit is final, with one line on stderr: ``MOUNT_POINT_BUSY``, ``NOT_BLANK`` (no
    filesystem but data: never formatted), ``CANNOT_PROBE``, 1 (a command such as mkfs or mount
    failed). Raises ValueError for an id of no kind it knows (see the module doc) or a bad path.
    """
    path = check_mount_path(path)
    t = tools or MountTools()
    q, j = shlex.quote, shlex.join
    find, missing = _find_device(volume_id, t)
    return "\n".join([
        "set -eu",
        f"vol={q(volume_id)} mnt={q(path)}",
        f"mounts={q(t.mounts_file)}",
        'say() { echo "gpuorch: volume $vol: $*"; }',
        'fail() { code=$1; shift; echo "gpuorch: volume $vol: $*" >&2; exit "$code"; }',
        f'as_root() {{ if [ "$(id -u)" = 0 ]; then "$@"; else {j(t.sudo)} "$@"; fi; }}',
        *find,
        # One look, never a wait: the daemon runs this again next pass and bounds the wait itself.
        f'dev=$(find_device) || fail {NOT_YET} {q("no device yet (" + missing + ")")}',
        # Already mounted there (a second run, or a restarted daemon): done. Something else there: stop.
        'current=$(MNT="$mnt" awk \'$2 == ENVIRON["MNT"] { src = $1 } END { print src }\' "$mounts")',
        'if [ -n "$current" ]; then',
        '  if [ "$(readlink -f "$current")" = "$dev" ]; then say "already mounted at $mnt ($dev)"; exit 0; fi',
        f'  fail {MOUNT_POINT_BUSY} "$mnt has $current mounted, not $dev; free it or choose another volume.mount"',
        "fi",
        f'as_root head -c 1 "$dev" >/dev/null || fail {CANNOT_PROBE} "cannot read $dev"',
        f'probe=0; as_root {j(t.blkid)} -p "$dev" >/dev/null 2>&1 || probe=$?',
        'case "$probe" in',
        '  0) say "$dev has a filesystem: mounting it as it is" ;;',
        f"  2) if [ \"$(as_root head -c {BLANK_CHECK_BYTES} \"$dev\" | tr -d '\\000' | wc -c)\" -ne 0 ]; then",
        f'       fail {NOT_BLANK} "$dev holds data but no filesystem blkid knows:'
        ' not formatting it; mount it yourself"',
        "     fi",
        '     say "$dev is blank: formatting it (ext4)"',
        f'     as_root {j(t.mkfs)} "$dev" ;;',
        f'  *) fail {CANNOT_PROBE} "cannot probe $dev (blkid exit $probe)" ;;',
        "esac",
        'as_root mkdir -p "$mnt"',
        f'as_root {j(t.mount)} "$dev" "$mnt"',
        'if [ "$probe" = 2 ]; then as_root chown "$(id -u):$(id -g)" "$mnt"; fi',
        'say "mounted $dev at $mnt"',
    ]) + "\n"


def _find_device(volume_id: str, t: MountTools) -> tuple[list[str], str]:
    """The ``find_device`` shell function for the volume's kind, and what "not there" means."""
    q = shlex.quote
    if EBS_VOLUME_ID.match(volume_id):
        serial = volume_id.replace("-", "")
        links = [f"{t.by_id_dir}/{EBS_BY_ID_PREFIX}{serial}", f"{t.by_id_dir}/{EBS_BY_ID_PREFIX}{serial}-ns-1"]
        return [
            "find_device() {",
            f"  for link in {' '.join(q(x) for x in links)}; do",
            '    if [ -e "$link" ]; then readlink -f "$link"; return 0; fi',
            "  done",
            f"  for d in {q(t.sys_block_dir)}/nvme*; do",
            '    [ -r "$d/device/serial" ] || continue',
            f'    if [ "$(tr -d " " < "$d/device/serial")" = {q(serial)} ]; then echo {q(t.dev_dir)}/"${{d##*/}}"; '
            "return 0; fi",
            "  done",
            "  return 1",
            "}",
        ], (f"no {links[0]}, no NVMe device with serial {serial}: is it attached to this instance, "
            "and is this a Nitro instance type?")
    gcp = GCP_DISK_ID.match(volume_id)
    if gcp:
        name = gcp["name"]
        links = [f"{t.by_id_dir}/google-{name}", f"{t.by_id_dir}/scsi-0Google_PersistentDisk_{name}"]
        what = f"no {links[0]}: is the disk attached to this VM with device name {name}?"
    elif AZURE_DISK_ID.match(volume_id):
        links = [f"{t.azure_dir}/scsi1/lun{AZURE_LUN}", f"{t.azure_dir}/data/by-lun/{AZURE_LUN}"]
        what = f"no {links[0]} or {links[1]}: is the disk attached to this VM on LUN {AZURE_LUN}?"
    else:
        raise ValueError(f"{volume_id!r} is not a volume id the mount step knows (an EBS vol-..., a GCP "
                         "<zone>/<disk>, or an Azure disk resource id)")
    return [
        "find_device() {",
        f"  for link in {' '.join(q(x) for x in links)}; do",
        '    if [ -e "$link" ]; then readlink -f "$link"; return 0; fi',
        "  done",
        "  return 1",
        "}",
    ], what
