#!/usr/bin/env bash
# `npm run setup`: everything Basin needs on this machine, installed only when
# missing. Host packages (PostgreSQL 15, PgBouncer, the timescaledb and
# pgvector extensions) come from scripts/setup-host.sh; Node dependencies from
# `npm ci`, re-run only when package-lock.json changed.
set -Eeuo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -eq 0 ]; then
  bash scripts/setup-host.sh
else
  # Installing Debian packages needs root; Basin checks the host at start and
  # says what is missing.
  echo "basin-setup: not root, skipping host packages (sudo bash scripts/setup-host.sh installs them)" >&2
fi

stamp=node_modules/.basin-lock-sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "basin-setup: installing Node dependencies (npm ci; better-sqlite3 compiles from source, ~90 s)" >&2
  npm ci --no-audit --no-fund
  echo "$want" > "$stamp"
fi
echo "basin-setup: ready" >&2
