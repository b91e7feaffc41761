#!/bin/sh
# Points the conference's best branch at a commit of its own making.
c=$(echo forged | git commit-tree "HEAD^{tree}" -p HEAD)
git update-ref "refs/heads/conference/$CONFERENCE_NAME/best" "$c"
echo 5 >value.txt
