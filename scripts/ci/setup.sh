#!/usr/bin/env bash
# Install the Debian packages the tests need (CI runs as root on a fresh machine). Each file of setup.d/ installs
# what one kind of test needs; the tests themselves start and stop their services on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")"
for script in setup.d/*.sh; do
  [ -e "$script" ] || continue
  echo "ci setup: $script"
  bash "$script"
done
