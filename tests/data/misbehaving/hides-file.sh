#!/bin/sh
# Hides a file from git with a .gitignore that ignores itself too: git sees no change at all.
mkdir -p hidden
printf '*\n' >hidden/.gitignore
echo 1 >hidden/secret.txt
