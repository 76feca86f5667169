# Mirrors the README; `just` is optional, every recipe is a plain command.

# Build the release binaries and install hpcrun-rs, hpcprof-rs and
# hpcview-tui (default ~/.cargo/bin; `just install DIR` for DIR/bin)
install *PREFIX:
    sh install.sh {{PREFIX}}

# The pipeline end to end on examples/abc (installs the tools first)
demo:
    sh examples/abc/demo.sh

# Every test (builds the tools, compiles the examples with gcc)
test:
    cargo test --workspace --no-fail-fast

# What CI runs
ci:
    bash .ci/run

# Rewrite docs/VIEWER.md's screen captures from the viewer's snapshot
# tests and GUIDE's detail-pane capture from the viewer's fixture
# (hpcview-tui/tests/doc_captures.rs checks that they match)
viewer-docs:
    HPCVIEW_UPDATE_DOCS=1 cargo test -q -p hpcview-tui --test doc_captures

# Rewrite docs/GUIDE.md's event table from hpcrun-rs/abi/src/event_doc.rs
# (hpcrun-rs/tests/events_docs.rs checks that it matches)
guide-events:
    HPCRUN_UPDATE_DOCS=1 cargo test -q -p hpcrun-rs --test events_docs guide_table

# Rewrite the example outputs of docs/GUIDE.md from fresh runs of the
# bundled programs (tests/doc_examples.rs checks their form)
guide-examples:
    UPDATE_DOCS=1 cargo test -q -p pipeline-tests --test doc_examples

lint:
    cargo fmt --all --check
    cargo clippy --workspace --all-targets -- -D warnings

# Added cost per malloc/free pair: native vs hpcrun-rs vs heaptrack
bench-alloc:
    sh benches/alloc_overhead.sh

# Merge time for 1k/4k/16k synthetic MPI rank files (docs/SCALING.md)
bench-scaling:
    sh benches/scaling.sh

# Run-time overhead at the default period: native vs hpcrun-rs vs the
# per-thread null-sampler floor vs perf record (same rate) on the examples,
# HPC Challenge, an OpenMP LULESH proxy (1 and 2 threads) and LAMMPS, plus
# LULESH 2.0 and hypre's AMG given clones (--lulesh-src DIR, --amg-src DIR);
# alternating rounds, medians of per-pair ratios (docs/PERFORMANCE.md).
# Installs hpcc/perf/OpenMPI/LAMMPS if missing. Extra arguments go to the
# harness, e.g. `just overhead --only lulesh_proxy --no-perf --rounds 11`.
overhead *ARGS:
    #!/usr/bin/env sh
    set -eu
    need=""
    command -v hpcc >/dev/null 2>&1 || need="$need hpcc"
    command -v perf >/dev/null 2>&1 || need="$need linux-perf"
    command -v mpicc >/dev/null 2>&1 || need="$need openmpi-bin libopenmpi-dev"
    command -v lmp >/dev/null 2>&1 || need="$need lammps"
    [ -f /usr/share/lammps/examples/melt/in.melt ] || need="$need lammps-examples"
    if [ -n "$need" ]; then
        apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $need
    fi
    cargo build --release -q -p hpcrun-rs -p hpcrun-preload
    cargo build --release -q -p benches --bin overhead
    target/release/overhead {{ARGS}}

# mem:soft against Valgrind's ground truth, per heap object (docs/ACCURACY.md):
# DHAT's access volume (and simulated LLC misses with --sim) vs the data view;
# prints the table and appends it to docs/ACCURACY.md. E.g. `just truth
# --label after --xsbench PATH --lulesh PATH`, `just truth --only gather --no-append`.
truth *ARGS:
    cargo build --release -q -p hpcrun-rs -p hpcrun-preload -p hpcprof-rs
    cargo build --release -q -p benches --bin truth
    target/release/truth {{ARGS}}
