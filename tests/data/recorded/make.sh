#!/bin/sh
# Records the format fixture: a small deterministic conference run by a given git-conference
# binary, paused after round 1 (`Pause every: 1`), pushed with `git conference push` to a bare
# remote, and saved as a bundle of that remote (every ref: main, the conference's branches, its
# event log and attempts, refs/notes/conference).
#
#   sh tests/data/recorded/make.sh [BINARY] [OUT]
#
# BINARY defaults to target/debug/git-conference, OUT to tests/data/recorded/conference.bundle.
# Rerunnable, but the committed bundle is the truth: it was made by the release named in
# README.md, and tests/e2e/format.rs resumes it under the code being tested.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bin=$(cd "$(dirname "${1:-target/debug/git-conference}")" && pwd)/$(basename "${1:-target/debug/git-conference}")
out=${2:-$here/conference.bundle}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A hermetic git: no user or system config, a fixed identity, UTC, fixed dates for the base commit.
export HOME="$work/home" XDG_CONFIG_HOME="$work/home/.config" GIT_CONFIG_NOSYSTEM=1 TZ=UTC
export GIT_AUTHOR_NAME="Recorder" GIT_AUTHOR_EMAIL="recorder@example.com"
export GIT_COMMITTER_NAME="Recorder" GIT_COMMITTER_EMAIL="recorder@example.com"
mkdir -p "$HOME" "$work/bin"
ln -s "$bin" "$work/bin/git-conference"
export PATH="$work/bin:$PATH"

repo="$work/repo"
mkdir -p "$repo"
cd "$repo"
git init -q -b main
cp "$here/project/"* .
chmod +x eval.sh agent.sh
git add -A
GIT_AUTHOR_DATE="2026-11-23T12:00:00Z" GIT_COMMITTER_DATE="2026-11-23T12:00:00Z" \
  git commit -q -m "The recorded conference's project"

# Round 1 runs, then the conference pauses (exit 3) as `Pause every: 1` asks.
set +e
git conference start rec </dev/null
code=$?
set -e
if [ "$code" != 3 ]; then
  echo "make.sh: expected the conference to pause (exit 3), got $code" >&2
  exit 1
fi
git conference status rec

git init -q --bare --initial-branch=main "$work/remote.git"
git remote add origin "$work/remote.git"
git push -q origin main
git conference push origin
git -C "$work/remote.git" bundle create "$out" --all
git bundle list-heads "$out"
