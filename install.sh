#!/bin/sh
# Builds the release binaries and installs hpcrun-rs, hpcprof-rs and
# hpcview-tui into PREFIX/bin, and the preload library hpcrun-rs needs into
# PREFIX/lib/hpc-memprof/ (where hpcrun-rs looks for it).
# Usage: sh install.sh [PREFIX]
#   PREFIX defaults to ${CARGO_HOME:-$HOME/.cargo}: rustup puts its bin/ on
#   PATH, so the tools are found at once.
set -eu
cd "$(dirname "$0")"
prefix=${1:-${CARGO_HOME:-$HOME/.cargo}}
bindir=$prefix/bin
libdir=$prefix/lib/hpc-memprof
echo "install.sh: building the release binaries (cargo build --release; a first build takes several minutes)"
cargo build --release -p hpcrun-rs -p hpcrun-preload -p hpcprof-rs -p hpcview-tui
# Where cargo put them: CARGO_TARGET_DIR when set (relative to this
# directory, as cargo reads it here), else target/.
release=${CARGO_TARGET_DIR:-target}/release
for f in libhpcrun_preload.so hpcrun-rs hpcprof-rs hpcview-tui; do
    if [ ! -f "$release/$f" ]; then
        echo "install.sh: $release/$f is missing after the build; nothing was installed" >&2
        exit 1
    fi
done
mkdir -p "$bindir" "$libdir"
install -m 755 "$release/libhpcrun_preload.so" "$libdir/"
for tool in hpcrun-rs hpcprof-rs hpcview-tui; do
    install -m 755 "$release/$tool" "$bindir/"
done
echo "install.sh: installed hpcrun-rs, hpcprof-rs and hpcview-tui in $bindir (the preload library in $libdir)"
case ":$PATH:" in
*":$bindir:"*) ;;
*) echo "install.sh: $bindir is not on your PATH; add it with:  export PATH=\"$bindir:\$PATH\"" ;;
esac
