#!/bin/sh
# Hides files from git: one named in the tracked .gitignore (put back by the revert, which then
# no longer sees the file as its own), and a folder whose .gitignore ignores itself too.
echo secret.txt >>.gitignore
echo 1 >secret.txt
mkdir -p hidden
printf '*\n' >hidden/.gitignore
echo 1 >hidden/secret.txt
