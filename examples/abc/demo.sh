#!/bin/sh
# The README's quick start: build and install the tools (install.sh), then
# the whole pipeline on the bundled abc example: compile abc with gcc,
# measure, merge, report.
# Usage: sh examples/abc/demo.sh   (from anywhere; writes target/abc-demo/)
#   PREFIX=DIR sh examples/abc/demo.sh installs into DIR/bin instead of
#   ${CARGO_HOME:-$HOME/.cargo}/bin (see install.sh).
set -eu
cd "$(dirname "$0")/../.."
prefix=${PREFIX:-${CARGO_HOME:-$HOME/.cargo}}
echo "demo: 1/4 building the release binaries and installing the tools"
sh install.sh "$prefix"
bin=$prefix/bin
out=target/abc-demo
rm -rf "$out"
mkdir -p "$out"
echo "demo: 2/4 compiling examples/abc/abc.c (gcc -O2 -g)"
gcc -O2 -g -o "$out/abc" examples/abc/abc.c
# 32 sweeps (about 10 s): over 1,000 memory samples, enough for shares
# worth comparing (the report says so when there are fewer).
echo "demo: 3/4 measuring and merging: hpcrun-rs -o $out/measurements $out/abc 32; hpcprof-rs -o $out/db $out/measurements"
"$bin/hpcrun-rs" -o "$out/measurements" "$out/abc" 32
"$bin/hpcprof-rs" -o "$out/db" "$out/measurements"
echo "demo: 4/4 the answer: hpcview-tui $out/db --report --top 5"
"$bin/hpcview-tui" "$out/db" --report --top 5
