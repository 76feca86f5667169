#!/usr/bin/env bash
# Cost of hpcrun-rs checkpoints (--checkpoint SECS): a paired comparison.
#
# Each round runs the workload under hpcrun-rs once per interval in
# INTERVALS (0 = no checkpoints), the order rotated per round so that a
# drifting machine load hits them alike, and prints wall and CPU seconds
# (user + system of the process tree). Compare the medians per interval
# and the per-round differences against interval 0; divide the CPU
# difference by the number of checkpoints (wall / interval) for the cost
# of one checkpoint.
#
# Workload: LAMMPS (Debian `lmp`) on its 3d Lennard-Jones melt example,
# run for STEPS steps (a real C++ application with deep call paths: large
# trees to copy), one process; or WORKLOAD="cmd args" for another one.
#
#   cargo build --release -p hpcrun-rs -p hpcrun-preload
#   ROUNDS=5 INTERVALS="0 0.5 10" sh benches/checkpoint_cost.sh
set -eu
ROUNDS=${ROUNDS:-5}
INTERVALS=${INTERVALS:-"0 0.5 10"}
STEPS=${STEPS:-4000}
BIN=${BIN:-target/release}
WORK=${WORK:-target/checkpoint-cost}
mkdir -p "$WORK"
if [ -z "${WORKLOAD:-}" ]; then
    sed "s/^run.*/run $STEPS/" /usr/share/lammps/examples/melt/in.melt > "$WORK/in.melt"
    WORKLOAD="lmp -in $WORK/in.melt -log none -screen none"
fi
echo "# round interval wall_s cpu_s profiles bytes (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
set -- $INTERVALS
n=$#
for round in $(seq "$ROUNDS"); do
    # Rotate the order of the intervals per round.
    order=""
    i=0
    for c in $INTERVALS; do
        order="$order $c"
    done
    shift_by=$(( (round - 1) % n ))
    rotated=$(echo $order | tr ' ' '\n' | awk -v s="$shift_by" -v n="$n" '{a[NR-1]=$0} END {for (i=0;i<n;i++) print a[(i+s)%n]}')
    for c in $rotated; do
        rm -rf "$WORK/m"
        TIMEFORMAT='%R %U %S'
        t=$( { time "$BIN/hpcrun-rs" --checkpoint "$c" -o "$WORK/m" $WORKLOAD > /dev/null 2> "$WORK/err"; } 2>&1 )
        set -- $t
        cpu=$(echo "$2 + $3" | bc)
        files=$(ls "$WORK/m" | grep -c '\.hpcrun$' || true)
        bytes=$(cat "$WORK"/m/*.hpcrun | wc -c)
        echo "$round $c $1 $cpu $files $bytes"
    done
done
echo "# load average: $(cut -d' ' -f1-3 /proc/loadavg)"
