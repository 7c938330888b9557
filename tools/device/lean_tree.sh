#!/usr/bin/env bash
# The device tool sends the working tree (tracked files) with every call, and the tree counts
# towards the call's 64 MiB: 34 MiB of it are results folders and test fixtures no device recipe
# reads. For a run of staging calls (model slices, the browser's parts) take them out of the working
# tree and put them back afterwards; git keeps them, nothing is committed.
#   tools/device/lean_tree.sh on      removes them (refuses while they have uncommitted changes)
#   tools/device/lean_tree.sh off     restores them (git checkout)
#   tools/device/lean_tree.sh list    the files `on` removes (pack.py --lean counts the tree without them)
# Kept: what recipes read (KEEP). Never commit while it is on: the removals would be committed.
set -euo pipefail
cd "$(dirname "$0")/../.."
DIRS=(bench/results tests/fixtures)
KEEP='^tests/fixtures/parity/prompt_256\.txt$'
list() { git ls-files -- "${DIRS[@]}" | grep -Ev "$KEEP" || true; }
case ${1:-} in
  list) list ;;
  on)
    [ -z "$(git status --porcelain -- "${DIRS[@]}")" ] || { echo "lean_tree: uncommitted changes under ${DIRS[*]}; commit them first"; exit 1; }
    list | tr '\n' '\0' | xargs -0 rm -f
    echo "lean_tree: on ($(list | wc -l) files out of the working tree; 'tools/device/lean_tree.sh off' puts them back)" ;;
  off)  # only what `on` removed: edits made meanwhile to other files under DIRS stay
    git ls-files -z -d -- "${DIRS[@]}" | xargs -0 -r git checkout --
    echo "lean_tree: off" ;;
  *) echo "usage: tools/device/lean_tree.sh on|off|list"; exit 2 ;;
esac
