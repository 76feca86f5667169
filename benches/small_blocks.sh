#!/bin/sh
# Programs of a million small blocks: wall time and peak RSS natively,
# under hpcrun-rs (default settings) and under heaptrack, alternating, 5
# runs each (medians), with the ratios against native.
#   tests/programs/csr_rows.c         500,000 rows of 216 B + 108 B, 30 SpMV
#   tests/programs/node_containers.cpp  1,000,000 unordered_map nodes of 24 B
#                                       + 250,000 list nodes, 4 rounds
#   tests/programs/cg_rows.cpp        a CG solve on 48^3 rows, a new[] per
#                                       row (331,776 blocks), 60 iterations
# Usage: sh benches/small_blocks.sh   (heaptrack: apt-get install heaptrack;
# without it that column says n/a). Prints a Markdown table.
set -eu
cd "$(dirname "$0")/.."
cargo build --release -q -p hpcrun-rs -p hpcrun-preload
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -O2 -g -o "$work/csr_rows" tests/programs/csr_rows.c
g++ -O2 -g -o "$work/node_containers" tests/programs/node_containers.cpp
g++ -O2 -g -o "$work/cg_rows" tests/programs/cg_rows.cpp
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# time_of FILE CMD...: appends "seconds kilobytes" of one run to FILE.
time_of() {
    out=$1; shift
    /usr/bin/time -f '%e %M' -o "$work/t" "$@" >/dev/null 2>&1 || true
    cat "$work/t" >>"$out"
}
echo "| program | native s | hpcrun-rs s (x) | heaptrack s (x) | native peak RSS MB | hpcrun-rs RSS (x) | heaptrack RSS (x) |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for case in "csr_rows 500000 30" "node_containers 1000000 4" "cg_rows 48 60"; do
    set -- $case
    prog=$1; shift
    : >"$work/n"; : >"$work/h"; : >"$work/k"
    for i in 1 2 3 4 5; do
        time_of "$work/n" "$work/$prog" "$@"
        rm -rf "$work/m"
        time_of "$work/h" target/release/hpcrun-rs -o "$work/m" "$work/$prog" "$@"
        if command -v heaptrack >/dev/null 2>&1; then
            rm -f "$work"/ht*
            time_of "$work/k" heaptrack -o "$work/ht" "$work/$prog" "$@"
        fi
    done
    ns=$(cut -d' ' -f1 "$work/n" | median); nm=$(cut -d' ' -f2 "$work/n" | median)
    hs=$(cut -d' ' -f1 "$work/h" | median); hm=$(cut -d' ' -f2 "$work/h" | median)
    if [ -s "$work/k" ]; then
        ks=$(cut -d' ' -f1 "$work/k" | median); km=$(cut -d' ' -f2 "$work/k" | median)
    else
        ks=0; km=0
    fi
    awk -v p="$prog $*" -v ns="$ns" -v nm="$nm" -v hs="$hs" -v hm="$hm" -v ks="$ks" -v km="$km" 'BEGIN {
        k = ks > 0 ? sprintf("%.2f (%.2f)", ks, ks / ns) : "n/a";
        kr = km > 0 ? sprintf("%.0f (%.2f)", km / 1024, km / nm) : "n/a";
        printf "| %s | %.2f | %.2f (%.2f) | %s | %.0f | %.0f (%.2f) | %s |\n", p, ns, hs, hs / ns, k, nm / 1024, hm / 1024, hm / nm, kr
    }'
done
