#!/bin/sh
# Added cost per malloc/free pair: native vs hpcrun-rs vs heaptrack, side by
# side, alternating, 5 runs each; prints medians (ns per pair) and the added
# cost. Usage: sh benches/alloc_overhead.sh [COUNT]   (needs heaptrack:
# apt-get install heaptrack; without it that column says n/a)
set -eu
cd "$(dirname "$0")/.."
count=${1:-1000000}
cargo build -q -p hpcrun-rs -p hpcrun-preload
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -O2 -g -o "$work/malloc_bench" benches/programs/malloc_bench.c
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf '%-28s %10s %10s %10s %14s %14s\n' "case" native hpcrun-rs heaptrack "hpcrun added" "heaptrack added"
for size in 64 4096 200000; do
    case $size in
        64) label="untracked (64 B)";;
        4096) label="tracked (4096 B)";;
        *) label="tracked (200 KB)";;
    esac
    : >"$work/n"; : >"$work/h"; : >"$work/t"
    for i in 1 2 3 4 5; do
        "$work/malloc_bench" "$size" "$count" >>"$work/n"
        target/debug/hpcrun-rs -o "$work/m$size.$i" "$work/malloc_bench" "$size" "$count" 2>/dev/null >>"$work/h"
        if command -v heaptrack >/dev/null 2>&1; then
            heaptrack -o "$work/ht$size.$i" "$work/malloc_bench" "$size" "$count" 2>/dev/null | grep -E '^[0-9.]+$' >>"$work/t"
        fi
    done
    n=$(median <"$work/n"); h=$(median <"$work/h")
    t=$(if [ -s "$work/t" ]; then median <"$work/t"; else echo n/a; fi)
    ha=$(echo "$h $n" | awk '{printf "%.1f", $1-$2}')
    ta=$(if [ "$t" = n/a ]; then echo n/a; else echo "$t $n" | awk '{printf "%.1f", $1-$2}'; fi)
    printf '%-28s %10s %10s %10s %14s %14s\n' "$label" "$n" "$h" "$t" "$ha" "$ta"
done
