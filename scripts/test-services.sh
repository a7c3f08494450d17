#!/usr/bin/env bash
# Installs what the test suite needs beyond the virtualenv. Idempotent; quiet when all is present.
#   - System packages (scripts/deps.sh, also `make deps`): OpenSSH server for the SSH runner's
#     tests, Chromium for the dashboard's browser tests, podman/runc/busybox for the container tests.
#   - Azurite (npm, into .azurite/): the az:// checkpoint store's tests run against it.
#   - the `workloads` extra (torch 2.13.0 CPU, transformers, peft, lightning): the `workloads`-marked tests.
set -euo pipefail
cd "$(dirname "$0")/.."

have_sshd() {
  command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ]
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

# System packages (sshd, chromium, podman): scripts/deps.sh says what it installs before installing it.
./scripts/deps.sh

# e2fsprogs (mkfs.ext4, debugfs) and blkid: the volume mount step's tests format a disk image
# and the GCP/Azure volume end-to-end tests read the file an attempt left inside it.
if ! command -v mkfs.ext4 >/dev/null 2>&1 || ! command -v debugfs >/dev/null 2>&1 \
    || ! command -v blkid >/dev/null 2>&1; then
  echo "test-services: installing e2fsprogs and util-linux (mkfs.ext4, debugfs, blkid) for the volume tests"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      e2fsprogs util-linux >/dev/null 2>&1 \
    || echo "test-services: could not install e2fsprogs; the volume mount and end-to-end tests will be skipped" >&2
fi

# sshd refuses to start without its privilege-separation directory (absent in containers).
if have_sshd && [ ! -d /run/sshd ]; then
  as_root mkdir -p /run/sshd || true
fi

# PostgreSQL for the `postgres`-marked HA tests: they use 127.0.0.1:5432 (trust auth, user
# postgres) when it answers, else start a throwaway cluster with initdb, else skip with a reason.
# Here we only start an installed cluster that is down; nothing is installed.
if command -v pg_isready >/dev/null && ! pg_isready -q -h 127.0.0.1 -p 5432; then
  if command -v pg_ctlcluster >/dev/null && command -v pg_lsclusters >/dev/null; then
    read -r ver name _ < <(pg_lsclusters --no-header | awk '$3 == 5432' || true) || true
    if [ -n "${ver:-}" ]; then
      echo "test-services: starting PostgreSQL cluster $ver/$name on port 5432"
      pg_ctlcluster "$ver" "$name" start || echo "test-services: could not start it; postgres tests use a throwaway cluster or skip"
    fi
  fi
fi

# Azurite, the Azure Blob Storage emulator, for the `azure`-marked az:// store tests (they start
# it on 127.0.0.1 themselves and skip with the reason when it is missing). Project-local, pinned.
AZURITE_VERSION=3.35.0
if [ ! -x .azurite/node_modules/.bin/azurite-blob ]; then
  if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "test-services: node and npm are missing, so Azurite is not installed; the az:// store tests will be skipped" >&2
  else
    rm -rf .azurite.partial
    echo "test-services: installing azurite@$AZURITE_VERSION with npm into .azurite/ (the az:// store tests use it)"
    if npm install --prefix .azurite.partial --no-save --no-audit --no-fund --loglevel=error \
        "azurite@$AZURITE_VERSION" >/dev/null 2>&1 && [ -x .azurite.partial/node_modules/.bin/azurite-blob ]; then
      rm -rf .azurite && mv .azurite.partial .azurite  # whole or not at all
    else
      rm -rf .azurite.partial
      echo "test-services: npm could not install azurite@$AZURITE_VERSION; the az:// store tests will be skipped" >&2
    fi
  fi
fi

# gpuorch.integrations' tests train real models: torch==2.13.0 is the CPU build kept on these
# machines (pinned: any other version downloads a CUDA build of several GB).
if [ -x .venv/bin/python ] && ! .venv/bin/python -c "import torch, transformers, peft, lightning" >/dev/null 2>&1; then
  echo "test-services: installing the workloads extra (torch==2.13.0 CPU, transformers, peft, accelerate, lightning) into .venv"
  .venv/bin/python -m pip install -q -e '.[workloads]' \
    || echo "test-services: could not install the workloads extra; the workloads tests will be skipped" >&2
fi
exit 0
