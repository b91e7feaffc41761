#!/bin/sh
# Untracked junk and an ignored build artefact; no real change.
echo junk >junk.tmp
mkdir -p build
echo object >build/cache.o
