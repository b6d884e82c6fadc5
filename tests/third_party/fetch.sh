#!/usr/bin/env bash
# Download the pinned third-party dd test suites into DEST (outside this repo).
#
# Usage: tests/third_party/fetch.sh DEST
#
# Creates DEST/toybox-cb5b0deec490, DEST/busybox-371fe9f71d44 and
# DEST/coreutils-v9.1, then prints the run.sh command line. Nothing is built;
# only test scripts are used. Override the *_URL variables to use mirrors.

set -euo pipefail

TOYBOX_URL=${TOYBOX_URL:-https://github.com/landley/toybox}
TOYBOX_COMMIT=cb5b0deec490ce30a32f2c0be99d66daced48f93
BUSYBOX_URL=${BUSYBOX_URL:-https://github.com/mirror/busybox}
BUSYBOX_COMMIT=371fe9f71d445d18be28c82a2a6d82115c8af19d
COREUTILS_URL=${COREUTILS_URL:-https://github.com/coreutils/coreutils}
COREUTILS_COMMIT=ca22b9eba09feae9ad5c8105c37e2ae5fb9abbb2 # tag v9.1

[ $# -eq 1 ] || { echo "usage: $0 DEST" >&2; exit 2; }
mkdir -p "$1"
dest=$(cd "$1" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(cd "$here/../.." && pwd)
case $dest/ in
  "$repo_root"/*) echo "fetch.sh: DEST must be outside the repository" >&2; exit 2 ;;
esac

# fetch_commit URL COMMIT DIR PATH... : shallow-fetch one commit, check out
# only the listed paths into DIR.
fetch_commit() {
  local url=$1 commit=$2 dir=$3; shift 3
  if [ -d "$dir" ]; then echo "$dir exists, keeping it"; return; fi
  local tmp; tmp=$(mktemp -d "$dest/.fetch.XXXXXX")
  git -C "$tmp" init -q
  git -C "$tmp" fetch -q --depth 1 "$url" "$commit"
  [ "$(git -C "$tmp" rev-parse FETCH_HEAD)" = "$commit" ] ||
    { echo "fetch.sh: $url: got $(git -C "$tmp" rev-parse FETCH_HEAD), want $commit" >&2; exit 1; }
  mkdir -p "$dir"
  git -C "$tmp" archive FETCH_HEAD "$@" | tar -x -C "$dir"
  rm -rf "$tmp"
  echo "$dir: $url @ $commit"
}

fetch_commit "$TOYBOX_URL" "$TOYBOX_COMMIT" "$dest/toybox-${TOYBOX_COMMIT:0:12}" \
  scripts/runtest.sh tests/dd.test
fetch_commit "$BUSYBOX_URL" "$BUSYBOX_COMMIT" "$dest/busybox-${BUSYBOX_COMMIT:0:12}" \
  testsuite/dd testsuite/runtest testsuite/testing.sh
fetch_commit "$COREUTILS_URL" "$COREUTILS_COMMIT" "$dest/coreutils-v9.1" \
  init.cfg tests/init.sh tests/lang-default tests/envvar-check tests/no-perl \
  tests/Coreutils.pm tests/CuSkip.pm tests/CuTmpdir.pm tests/dd

echo
echo "run: tests/third_party/run.sh $dest/toybox-${TOYBOX_COMMIT:0:12}" \
  "$dest/busybox-${BUSYBOX_COMMIT:0:12} $dest/coreutils-v9.1"
