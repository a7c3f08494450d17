#!/usr/bin/env bash
# The system packages the test suite needs, on their own (`make deps`; `make test` runs it first).
#   scripts/deps.sh          install what is missing, saying what and why before each install
#   scripts/deps.sh --list   only list them, with what each is for and whether it is installed
# Debian/Ubuntu (apt-get); needs root or passwordless sudo to install. Without either, or without
# apt-get, it says what to install by hand and the tests that need it skip with that reason.
set -euo pipefail

# package, the file (or command) that shows it is installed, what needs it
PACKAGES=(
  "openssh-server|/usr/sbin/sshd|the SSH runner's tests drive a real, throwaway sshd on 127.0.0.1"
  "chromium|/usr/bin/chromium|the browser-marked dashboard tests (Playwright drives it)"
  "chromium-driver|/usr/bin/chromedriver|the browser-marked dashboard tests (Chromium's WebDriver)"
  "podman|podman|the container-marked tests (scripts/install-podman.sh says why runc)"
  "runc|runc|the container-marked tests: the OCI runtime podman uses here"
  "busybox-static|/bin/busybox|the container-marked tests' smallest image"
)

installed() {
  case "$1" in
    /*) [ -x "$1" ] ;;
    *) command -v "$1" >/dev/null 2>&1 ;;
  esac
}

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
for entry in "${PACKAGES[@]}"; do
  IFS='|' read -r pkg probe why <<<"$entry"
  if installed "$probe"; then state="installed"; else state="missing"; missing+=("$pkg"); fi
  if [ "${1:-}" = "--list" ]; then
    printf '%-16s %-10s %s\n' "$pkg" "$state" "$why"
  fi
done
[ "${1:-}" = "--list" ] && exit 0
[ ${#missing[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
  echo "deps: missing ${missing[*]} and apt-get is not available; install them yourself, or their tests skip" >&2
  exit 0
fi
apt_install() {
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null 2>&1
}
echo "deps: installing system packages with apt-get: ${missing[*]} (scripts/deps.sh --list says why)"
if ! apt_install "${missing[@]}"; then
  # The package lists may be missing or stale (fresh containers): refresh them once and retry.
  echo "deps: refreshing the package lists (apt-get update) and retrying"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null 2>&1 || true
  apt_install "${missing[@]}" \
    || echo "deps: could not install ${missing[*]} (need root or passwordless sudo); their tests will be skipped" >&2
fi
exit 0
