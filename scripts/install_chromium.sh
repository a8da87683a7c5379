#!/usr/bin/env bash
# Headless Chromium from Debian's packages, for the browser test of the error-analysis page
# (tests/test_report_html.py). Does nothing when /usr/bin/chromium is already there; needs root (or sudo) and
# the package mirror, so CI runs it before pytest. Without Chromium that test fails and says so; it never skips.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
/usr/bin/chromium --version
