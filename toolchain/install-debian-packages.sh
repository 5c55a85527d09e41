#!/usr/bin/env bash
# Debian packages the build and the tests use. Idempotent; needs root (CI runs as root).
#
#   bash toolchain/install-debian-packages.sh           install the missing ones (apt-get)
#   bash toolchain/install-debian-packages.sh --check   list the missing ones; exit 1 if any
#
# build-essential, python3: node-gyp's build of the native parts (no prebuild in a checkout).
# busybox-static, toybox: the sandbox's tests of static and multi-call binaries, and the
# command dispatcher's (shims/brokered-bin).
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
# package:command — the command shows the package is there where dpkg cannot be asked.
packages=(build-essential:make python3:python3 busybox-static:busybox toybox:toybox chromium:chromium
  bubblewrap:bwrap socat:socat ripgrep:rg clang:clang libclang-rt-dev: e2fsprogs:chattr xfsprogs:mkfs.xfs
  openssh-server:sshd)

installed() {
  local package=${1%%:*} command=${1#*:}
  if command -v dpkg >/dev/null 2>&1; then
    dpkg -s "$package" >/dev/null 2>&1
  else
    # A package with no command of its own (a library) cannot be told here: taken as there.
    [[ -z $command ]] || PATH=$PATH:/usr/sbin:/sbin command -v "$command" >/dev/null 2>&1
  fi
}

missing=()
for entry in "${packages[@]}"; do
  installed "$entry" || missing+=("${entry%%:*}")
done
if [[ ${1:-} == --check ]]; then
  if [[ ${#missing[@]} -gt 0 ]]; then
    printf 'missing Debian packages: %s\n' "${missing[*]}" >&2
    printf 'install them as root with: bash toolchain/install-debian-packages.sh\n' >&2
    exit 1
  fi
  exit 0
fi
if [[ ${#missing[@]} -gt 0 ]]; then
  printf 'installing Debian packages: %s\n' "${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
