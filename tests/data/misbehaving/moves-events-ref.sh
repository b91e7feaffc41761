#!/bin/sh
# Points the conference's event log at the worktree's HEAD.
git update-ref "refs/conference/$CONFERENCE_NAME/events" HEAD
echo 5 >value.txt
