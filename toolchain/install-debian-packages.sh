#!/usr/bin/env bash
# Debian packages the build and the tests use. Idempotent; needs root (CI runs as root).
# chromium: the browser the backup viewer's test drives (playwright-core with
# executablePath /usr/bin/chromium; Playwright's own browser downloads are never used).
# bubblewrap, socat, ripgrep: what @anthropic-ai/sandbox-runtime (srt), the peer in
# `npm run bench`, needs.
# clang, libclang-rt-dev: libFuzzer for the native fuzz targets (bench/fuzz/run.sh).
# e2fsprogs: chattr/lsattr, with which the bench spreads its runs' directories (bench/lib/spread-dirs.ts),
# and filefrag, with which test/backup/reflink.test.ts sees a blob's shared extents.
# xfsprogs: mkfs.xfs for a reflink file system on a loop device (bench/lib/xfs-image.ts): the backup
# store's clone path, tested and measured on machines whose own disk cannot clone.
# openssh-server: a local sshd the network policy's test clones a git repository from over ssh
# (test/e2e/run-network-ssh.test.ts starts its own on a loopback port; the system's is not used).
set -euo pipefail
packages=(build-essential python3 busybox-static toybox chromium bubblewrap socat ripgrep clang libclang-rt-dev e2fsprogs xfsprogs openssh-server)
missing=()
for package in "${packages[@]}"; do
  dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
