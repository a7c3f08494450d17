#!/usr/bin/env bash
# Installs the container runtime the `container`-marked tests drive (docs/workloads.md): Debian's
# podman with the runc runtime (crun refuses this host's hybrid cgroup layout) and busybox-static
# (the tests' smallest image is a root filesystem holding busybox). Idempotent; quiet when present.
# Tests skip with the reason when podman is still missing after this.
set -euo pipefail

as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo -n "$@"
  else
    return 1
  fi
}

missing=()
command -v podman >/dev/null 2>&1 || missing+=(podman)
command -v runc >/dev/null 2>&1 || missing+=(runc)
[ -x /bin/busybox ] || missing+=(busybox-static)
[ ${#missing[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
  echo "test-services: ${missing[*]} missing and apt-get is not available; the container tests will be skipped" >&2
  exit 0
fi
echo "test-services: installing ${missing[*]} (apt-get) for the container tests"
install() {
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1
}
if ! install; then
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null 2>&1 || true
  install || echo "test-services: could not install ${missing[*]} (need root or passwordless sudo);" \
    "the container tests will be skipped" >&2
fi
exit 0
