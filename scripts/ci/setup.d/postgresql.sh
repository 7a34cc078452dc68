#!/usr/bin/env bash
# PostgreSQL for tests/test_instance_postgres.py (the Dagster instance on PostgreSQL); the test starts its own
# throwaway server on 127.0.0.1 and stops it.
set -euo pipefail
if dpkg -s postgresql >/dev/null 2>&1; then exit 0; fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql
