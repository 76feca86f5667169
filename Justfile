# Mirrors the README; `just` is optional, every recipe is a plain command.

# The pipeline end to end on examples/abc
demo:
    sh examples/abc/demo.sh

# Every test (builds the tools, compiles the examples with gcc)
test:
    cargo test --workspace

# What CI runs
ci:
    bash .ci/run

lint:
    cargo fmt --all --check
    cargo clippy --workspace --all-targets -- -D warnings

# Added cost per malloc/free pair: native vs hpcrun-rs vs heaptrack
bench-alloc:
    sh benches/alloc_overhead.sh

# Merge time for 1k/4k/16k synthetic MPI rank files (docs/SCALING.md)
bench-scaling:
    sh benches/scaling.sh
