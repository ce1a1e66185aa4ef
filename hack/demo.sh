#!/usr/bin/env bash
# The main job, run inside the test VM by `make demo`: goverbs' own view of
# the rxe devices next to nothing else but the kernel.
set -euo pipefail
goverbs=${1:?usage: demo.sh PATH-TO-GOVERBS}

echo "== goverbs rxe list"
"$goverbs" rxe list
echo
echo "== goverbs devinfo -v"
"$goverbs" devinfo -v
