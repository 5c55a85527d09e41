#!/usr/bin/env bash
# `npm test`, first: what the suite needs on this machine. As root with apt-get, the missing
# Debian packages of toolchain/install-debian-packages.sh are installed; otherwise they are
# checked, and a missing one stops the run, naming the line that installs it. Then the
# native parts are rebuilt if their sources changed, so the suite tests what native/ says.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
  bash toolchain/install-debian-packages.sh
else
  bash toolchain/install-debian-packages.sh --check
fi
node toolchain/build-if-stale.mjs native
