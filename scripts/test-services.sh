#!/usr/bin/env bash
# Installs what the test suite needs beyond the virtualenv. Idempotent; quiet when all is present.
set -euo pipefail

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
exit 0
