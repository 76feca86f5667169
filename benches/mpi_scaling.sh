#!/bin/sh
# The merge on MPI against the serial merge: 16,000 synthetic
# rank files (one thread per rank, 100 call paths each, as scaling.sh),
# merged by the serial `hpcprof-rs -j 2` and by `mpirun -np P hpcprof-rs
# --mpi -j 1` for P = 1, 2, 4 (on a 2-core machine P = 4 is
# oversubscribed). Per configuration: wall time (median of ROUNDS, order
# rotated per round), the largest peak RSS of any process, and whether the
# database is byte-identical to the serial one.
# Usage: ROUNDS=3 sh benches/mpi_scaling.sh [RANKS]
set -eu
cd "$(dirname "$0")/.."
cargo build -q --release -p hpcprof-rs -p benches
cargo build -q --release -p hpcprof-rs --features mpi --target-dir target/mpi
work=${SCALING_DIR:-target/scaling}
ranks=${1:-16000}
rounds=${ROUNDS:-3}
mkdir -p "$work"
in="$work/r$ranks"
if [ ! -d "$in" ]; then
    target/release/gen-profiles -o "$in" --threads "$ranks" --ranks "$ranks" --paths 100 >/dev/null
fi
serial=target/release/hpcprof-rs
mpi=target/mpi/release/hpcprof-rs
flags="--allow-run-as-root --oversubscribe"
run() { # config -> "wall maxrss_KB" on stdout
    rm -rf "$work/db-$1"
    case $1 in
    serial) /usr/bin/time -f '%e %M' -o "$work/t-$1" $serial -j 2 -o "$work/db-$1" "$in" >/dev/null 2>&1
        cat "$work/t-$1" ;;
    mpi*) p=${1#mpi}
        start=$(date +%s.%N)
        # shellcheck disable=SC2086
        mpirun $flags -np "$p" /usr/bin/time -f '%M' -a -o "$work/t-$1" $mpi --mpi -j 1 -o "$work/db-$1" "$in" >/dev/null 2>&1
        end=$(date +%s.%N)
        echo "$start $end $(sort -n "$work/t-$1" | tail -1)" | awk '{printf "%.2f %s\n", $2 - $1, $3}'
        rm -f "$work/t-$1" ;;
    esac
}
configs="serial mpi1 mpi2 mpi4"
: >"$work/results"
for r in $(seq 1 "$rounds"); do
    # the order rotated each round
    case $(( (r - 1) % 4 )) in
    0) order="serial mpi1 mpi2 mpi4" ;;
    1) order="mpi1 mpi2 mpi4 serial" ;;
    2) order="mpi2 mpi4 serial mpi1" ;;
    *) order="mpi4 serial mpi1 mpi2" ;;
    esac
    for c in $order; do
        echo "$c $(run "$c")" >>"$work/results"
    done
done
printf '%-8s %8s %14s %10s\n' config wall_s peak_RSS_MB identical
for c in $configs; do
    wall=$(awk -v c="$c" '$1 == c {print $2}' "$work/results" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    rss=$(awk -v c="$c" '$1 == c {print $3}' "$work/results" | sort -n | tail -1)
    same=yes
    cmp -s "$work/db-serial/profile.db" "$work/db-$c/profile.db" || same=no
    printf '%-8s %8s %14s %10s\n' "$c" "$wall" "$((rss / 1024))" "$same"
done
