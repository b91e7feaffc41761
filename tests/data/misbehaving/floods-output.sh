#!/bin/sh
# Prints 24 MB and changes nothing.
head -c 24000000 /dev/zero | tr '\0' 'x'
echo
echo "the end of the flood"
