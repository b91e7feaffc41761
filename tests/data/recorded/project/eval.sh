#!/bin/sh
# Evaluation of the recorded-conference fixture: score = sum of the numbers in a.txt, b.txt, c.txt.
awk '{ s += $1 } END { printf "score: %d\n", s }' a.txt b.txt c.txt
