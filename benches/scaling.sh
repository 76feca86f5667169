#!/bin/sh
# Merge time against the number of MPI ranks: synthetic rank files (one
# thread per rank, 100 call paths each) for 1k, 4k and 16k ranks, merged by
# the real hpcprof-rs with -j 2; wall time, input size, peak memory and
# database size. Usage: sh benches/scaling.sh [RANKS...]
set -eu
cd "$(dirname "$0")/.."
cargo build -q --release -p hpcprof-rs -p benches
work=${SCALING_DIR:-target/scaling}
mkdir -p "$work"
printf '%8s %10s %10s %12s %12s %10s\n' ranks input_MB wall_s MB_per_s peak_RSS_MB db_MB
for ranks in ${*:-1000 4000 16000}; do
    in="$work/r$ranks"
    if [ ! -d "$in" ]; then
        target/release/gen-profiles -o "$in" --threads "$ranks" --ranks "$ranks" --paths 100 >/dev/null
    fi
    rm -rf "$work/db$ranks"
    input=$(du -sm "$in" | cut -f1)
    /usr/bin/time -f '%e %M' -o "$work/time$ranks" target/release/hpcprof-rs -j 2 -o "$work/db$ranks" "$in" 2>/dev/null >/dev/null
    read -r wall rss <"$work/time$ranks"
    db=$(du -sm "$work/db$ranks" | cut -f1)
    printf '%8s %10s %10s %12s %12s %10s\n' "$ranks" "$input" "$wall" \
        "$(echo "$input $wall" | awk '{printf "%.0f", $1/$2}')" "$((rss / 1024))" "$db"
done
