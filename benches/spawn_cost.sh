#!/usr/bin/env bash
# Cost of short-lived children under hpcrun-rs: a program that runs a tiny
# C child (`int main(void) { return 0; }`) CHILDREN times, by fork + exec
# or posix_spawn, natively and under hpcrun-rs, in turn (A B A B ...), so
# that a drifting machine load hits both alike. Prints per round the wall
# and CPU seconds (user + system of the whole process tree, from GNU
# time) of each, and their ratios; quote the medians.
#
#   cargo build --release -p hpcrun-rs -p hpcrun-preload
#   ROUNDS=7 CHILDREN=200 MODE=fork sh benches/spawn_cost.sh
set -eu
ROUNDS=${ROUNDS:-7}
CHILDREN=${CHILDREN:-200}
MODE=${MODE:-fork}
BIN=${BIN:-target/release}
WORK=${WORK:-target/spawn-cost}
mkdir -p "$WORK"
gcc -O2 -o "$WORK/spawn_children" benches/programs/spawn_children.c
gcc -O2 -o "$WORK/tiny_child" benches/programs/tiny_child.c
measure() {
    /usr/bin/time -f "%e %U %S" -o "$WORK/time.txt" "$@" > /dev/null 2>> "$WORK/stderr.txt"
    awk '{ printf "%.3f %.3f", $1, $2 + $3 }' "$WORK/time.txt"
}
echo "# round native_wall native_cpu profiled_wall profiled_cpu wall_ratio cpu_ratio ($MODE, $CHILDREN children; load average: $(cut -d' ' -f1-3 /proc/loadavg))"
# Each round writes a measurements directory of its own, all removed at
# the end: files deleted while the next round creates its own would make
# ext4 skip the recently deleted inodes at every creation (for a minute or
# more), a cost that grows with every round and is no part of profiling.
rm -rf "$WORK"/m.*
for round in $(seq "$ROUNDS"); do
    native=$(measure "$WORK/spawn_children" "$WORK/tiny_child" "$CHILDREN" "$MODE")
    profiled=$(measure "$BIN/hpcrun-rs" -o "$WORK/m.$round" "$WORK/spawn_children" "$WORK/tiny_child" "$CHILDREN" "$MODE")
    echo "$round $native $profiled" | awk '{ printf "%s %s %s %s %s %.2f %.2f\n", $1, $2, $3, $4, $5, $4 / $2, $5 / $3 }'
done
rm -rf "$WORK"/m.*
