#!/bin/sh
# Says it improved everything, changes nothing.
echo "Done! I improved the score by 50%."
exit 0
