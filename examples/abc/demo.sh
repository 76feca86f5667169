#!/bin/sh
# The whole pipeline on the bundled abc example:
#   build the tools, compile abc with gcc, measure, merge, report.
# Usage: sh examples/abc/demo.sh   (from anywhere; writes target/abc-demo/)
set -eu
cd "$(dirname "$0")/../.."
cargo build -q -p hpcrun-rs -p hpcrun-preload -p hpcprof-rs -p hpcview-tui
out=target/abc-demo
rm -rf "$out"
mkdir -p "$out"
gcc -O2 -g -o "$out/abc" examples/abc/abc.c
target/debug/hpcrun-rs -e mem:soft@100000 -o "$out/measurements" "$out/abc" 3
target/debug/hpcprof-rs -o "$out/db" "$out/measurements"
target/debug/hpcview-tui "$out/db" --report --top 5
