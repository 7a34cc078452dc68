#!/usr/bin/env bash
# the review page's browser tests drive Debian's headless Chromium through chromedriver (Selenium).
set -euo pipefail
if dpkg -s chromium chromium-driver >/dev/null 2>&1; then
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
# a fresh machine has no package lists yet
apt-get install -y --no-install-recommends chromium chromium-driver || {
  apt-get update
  apt-get install -y --no-install-recommends chromium chromium-driver
}
