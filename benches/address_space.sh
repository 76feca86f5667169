#!/bin/sh
# The smallest address-space limit (`ulimit -v`, KiB, found by bisection
# to 2 MB) under which tests/programs/address_space.c (N threads, then 40
# blocks of 4 MiB) gets all its blocks, natively and under hpcrun-rs, for
# 2 and 16 threads.
# Usage: sh benches/address_space.sh [TARGET_DIR]   (default: release
# build; TARGET_DIR/hpcrun-rs is used as built, e.g. target/debug).
# Prints one line per case: threads, native MB, measured MB, difference.
set -eu
cd "$(dirname "$0")/.."
if [ $# -ge 1 ]; then
    bin=$1
else
    cargo build --release -q -p hpcrun-rs -p hpcrun-preload
    bin=target/release
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -O2 -pthread -o "$work/address_space" tests/programs/address_space.c
# fits KIB THREADS [PROFILER...]: true if the run gets all 40 blocks.
fits() {
    kib=$1; threads=$2; shift 2
    rm -rf "$work/m"
    out=$(sh -c "ulimit -v $kib && exec \"\$@\" \"$work/address_space\" 40 $threads" \
        sh "$@" 2>/dev/null) || true
    [ "$out" = "blocks 40" ]
}
# smallest THREADS [PROFILER...]: the smallest fitting limit in KiB, to
# 2,000 KiB (between 16 MB and 4 GB).
smallest() {
    lo=16000; hi=4000000
    while [ $((hi - lo)) -gt 2000 ]; do
        mid=$(((lo + hi) / 2))
        if fits "$mid" "$@"; then hi=$mid; else lo=$mid; fi
    done
    echo "$hi"
}
echo "| threads | native MB | measured MB | difference MB |"
echo "|---:|---:|---:|---:|"
for threads in 2 16; do
    native=$(smallest "$threads" env)
    measured=$(smallest "$threads" "$bin/hpcrun-rs" -o "$work/m")
    echo "| $threads | $((native / 1000)) | $((measured / 1000)) | $(((measured - native) / 1000)) |"
done
