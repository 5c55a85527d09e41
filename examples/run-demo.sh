#!/usr/bin/env bash
# Run a command in the kernel sandbox, see what it backed up, and undo it.
# Uses a throwaway workspace and backup home; run it from the repository.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
demo=$(mktemp -d)
trap 'rm -rf "$demo"' EXIT
export BROKERED_SHELL_HOME="$demo/home" XDG_DATA_HOME="$demo/xdg"
mkdir "$demo/workspace" && cd "$demo/workspace"
printf 'the original notes\n' > notes.txt
printf 'keep me\n' > draft.txt
bsh() { (cd "$repo" && npx --no-install brokered-shell "$@"); }

echo '$ brokered-shell run -- '"'"'sed -i s/original/edited/ notes.txt; rm draft.txt; echo x > /etc/brokered-demo'"'"
bsh run --workspace "$demo/workspace" -- 'sed -i s/original/edited/ notes.txt; rm draft.txt; echo x > /etc/brokered-demo' || true
echo "notes.txt: $(cat notes.txt); draft.txt: $([ -e draft.txt ] && echo present || echo gone)"
echo
echo '$ brokered-shell backups show latest'
bsh backups show latest
echo
echo '$ brokered-shell backups restore latest'
bsh backups restore latest
echo "notes.txt: $(cat notes.txt); draft.txt: $(cat draft.txt)"
