#!/bin/sh
# A deterministic researcher for the recorded-conference fixture (POSIX sh + awk).
# Researcher A edits a.txt, B edits b.txt, C edits c.txt, so findings are complementary and
# knowledge transfer merges more than one. The new value depends on the researcher, the round,
# the iteration and the current content; some iterations make things worse (reverted), one
# touches the frozen harness (rejected), one fails (crashed) and one changes nothing (no_change),
# so the recording holds every common verdict word.
r=${CONFERENCE_RESEARCHER:?}
i=${CONFERENCE_ITERATION:?}
k=${CONFERENCE_ROUND:?}
case $r in
  A) f=a.txt; w=1 ;;
  B) f=b.txt; w=2 ;;
  *) f=c.txt; w=3 ;;
esac
if [ "$r" = C ] && [ "$k" = 2 ] && [ "$i" = 3 ]; then
  exit 0
fi
if [ "$r" = B ] && [ "$k" = 1 ] && [ "$i" = 3 ]; then
  echo "# tuned" >> eval.sh
  echo "B: edits the harness" > "${CONFERENCE_NOTE_FILE:-/dev/null}"
  exit 0
fi
if [ "$r" = C ] && [ "$k" = 1 ] && [ "$i" = 2 ]; then
  echo 0 > "$f"
  echo "C: gives up" >&2
  exit 1
fi
v=$(awk 'NR == 1 { print $1 + 0 }' "$f")
new=$(awk -v v="$v" -v w="$w" -v i="$i" -v k="$k" 'BEGIN {
  if ((i + k + w) % 3 == 0) print v - 1 - w   # a worse idea: reverted
  else print v + w * i + (v % 5) + k          # an improvement that depends on the content
}')
printf '%s\n' "$new" > "$f"
printf '%s: %s %s -> %s (round %s, iteration %s)\n' "$r" "$f" "$v" "$new" "$k" "$i" > "${CONFERENCE_NOTE_FILE:-/dev/null}"
