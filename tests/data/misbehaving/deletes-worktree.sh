#!/bin/sh
# Removes its own worktree.
here=$(pwd)
cd /
rm -rf "$here"
