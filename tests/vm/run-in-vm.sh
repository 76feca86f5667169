#!/usr/bin/env bash
# Runs one command of this workspace (usually `cargo test ...`) inside a
# QEMU virtual machine whose CPU is a chosen model, to see the tests pass
# on a kernel and CPU other than this machine's: without AVX-512 (a smaller
# signal frame: AT_MINSIGSTKSZ), or with an AMD vendor (CPUID, glibc's
# string routines). QEMU's software emulation (TCG) cannot emulate
# AVX-512, so the guest is a real kernel on a CPU without it.
#
#   tests/vm/run-in-vm.sh [--cpu MODEL] [--mem SIZE] [--smp N]
#                         [--timeout SECONDS] [--no-build] -- COMMAND...
#
#   tests/vm/run-in-vm.sh --cpu Haswell-v4 -- cargo test -p pipeline-tests --test hostile
#   tests/vm/run-in-vm.sh --cpu EPYC-Rome -- cargo test --workspace --no-fail-fast
#
# The guest boots Debian's kernel (linux-image-amd64, unpacked under
# target/vm/, never installed) with a busybox initramfs, sees this
# machine's root file system read-only over virtio-9p with a tmpfs
# overlay on top (so /tmp, ~/.cargo and the rest are writable and
# forgotten at power-off), and this worktree writable at its own path. It
# prints the CPU's vendor, whether it has avx512f and the kernel's
# AT_MINSIGSTKSZ, runs COMMAND as root in the current directory with this
# shell's PATH, HOME, CARGO_HOME, RUSTUP_HOME and CI, powers off, and this
# script exits with COMMAND's status (125: the VM ended without one).
#
# A `cargo test ...` command is first built here (`cargo test ... --no-run`
# and the tools the end-to-end tests build), so the guest only checks that
# everything is fresh; emulation runs code 5-20 times slower.
#
# Needs qemu-system-x86, busybox-static (installed with apt-get when
# missing and run as root) and apt-get download for the kernel.
set -euo pipefail

cpu=Haswell-v4
mem=6G
smp=2
timeout_s=0
build=1
while [ $# -gt 0 ]; do
    case "$1" in
    --cpu) cpu=$2; shift 2 ;;
    --mem) mem=$2; shift 2 ;;
    --smp) smp=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    --) shift; break ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) break ;;
    esac
done
if [ $# -eq 0 ]; then
    echo "run-in-vm.sh: no command given (see --help)" >&2
    exit 2
fi

root=$(cd "$(dirname "$0")/../.." && pwd -P)
cwd=$(pwd -P)
case "$cwd/" in
"$root"/*) ;;
*) cwd=$root ;;
esac
vm=$root/target/vm
mkdir -p "$vm"

# Tools: qemu and a statically linked busybox.
need=()
command -v qemu-system-x86_64 >/dev/null 2>&1 || need+=(qemu-system-x86)
busybox=/bin/busybox
if ! [ -x "$busybox" ] || ! "$busybox" --list 2>/dev/null | grep -qx insmod ||
    ldd "$busybox" >/dev/null 2>&1; then
    need+=(busybox-static)
fi
if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "run-in-vm.sh: install ${need[*]} (apt-get install ${need[*]})" >&2
        exit 2
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${need[@]}"
fi

# The kernel: the package linux-image-amd64 depends on, unpacked once.
kdir=$vm/kernel
if ! [ -f "$kdir/ok" ]; then
    pkg=$(apt-cache depends linux-image-amd64 | sed -n 's/^ *Depends: \(linux-image-[0-9].*\)$/\1/p' | head -n 1)
    if [ -z "$pkg" ]; then
        echo "run-in-vm.sh: apt-cache names no kernel package for linux-image-amd64 (apt-get update?)" >&2
        exit 2
    fi
    rm -rf "$kdir" && mkdir -p "$kdir/deb"
    (cd "$kdir/deb" && apt-get download "$pkg")
    dpkg -x "$kdir"/deb/*.deb "$kdir/x"
    rm -rf "$kdir/deb"
    touch "$kdir/ok"
fi
vmlinuz=$(ls "$kdir"/x/boot/vmlinuz-* | head -n 1)
kver=${vmlinuz##*/vmlinuz-}
moddir=$kdir/x/lib/modules/$kver

# The initramfs: busybox, the modules for virtio-9p and overlayfs (each
# after the ones it depends on, from the modules' own `depends=`), /init.
initrd=$vm/initramfs-$kver.cpio.gz
if ! [ -f "$initrd" ] || [ "$0" -nt "$initrd" ]; then
    ir=$vm/initramfs
    rm -rf "$ir"
    mkdir -p "$ir"/{bin,dev,proc,sys,lower,rw,newroot,modules}
    cp "$busybox" "$ir/bin/busybox"
    ln -s busybox "$ir/bin/sh"
    order=()
    add_module() {
        local name=$1 file dep
        for dep in "${order[@]}"; do [ "$dep" = "$name" ] && return 0; done
        file=$(find "$moddir/kernel" -name "$name.ko*" -o -name "${name//_/-}.ko*" | head -n 1)
        if [ -z "$file" ]; then
            # Built into this kernel.
            grep -q "/${name}.ko" "$moddir/modules.builtin" && return 0
            echo "run-in-vm.sh: module $name not found under $moddir" >&2
            exit 2
        fi
        local out=$ir/modules/$name.ko
        case "$file" in
        *.xz) xz -dc "$file" >"$out" ;;
        *.zst) zstd -qdc "$file" >"$out" ;;
        *) cp "$file" "$out" ;;
        esac
        for dep in $("$busybox" strings "$out" | sed -n 's/^depends=//p' | tr , ' '); do
            add_module "$dep"
        done
        order+=("$name")
    }
    for m in virtio_pci 9pnet_virtio 9p overlay; do add_module "$m"; done
    printf '%s\n' "${order[@]}" >"$ir/modules/order"
    cat >"$ir/init" <<'EOF'
#!/bin/sh
# Mounts this machine's root (read-only, tmpfs overlay) and the worktree
# (writable), runs the job in a chroot there, powers off.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
# No network card; the loopback interface and this machine's host name
# (Open MPI needs both).
ip link set lo up
hostname "$(tr ' ' '\n' </proc/cmdline | sed -n 's/^vm.hostname=//p')"
for m in $(cat /modules/order); do insmod /modules/$m.ko || echo "init: insmod $m failed"; done
o=trans=virtio,version=9p2000.L,msize=512000
mount -t 9p -o $o,ro,cache=loose hostroot /lower || { echo "init: no hostroot"; poweroff -f; }
mount -t tmpfs -o mode=755 tmpfs /rw
mkdir -p /rw/upper /rw/work
mount -t overlay overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work /newroot ||
    { echo "init: overlay failed"; poweroff -f; }
wt=$(tr ' ' '\n' </proc/cmdline | sed -n 's/^vm.worktree=//p')
mount -t 9p -o $o worktree "/newroot$wt" || { echo "init: no worktree share"; poweroff -f; }
for d in proc sys dev; do mount --move /$d /newroot/$d; done
chroot /newroot /bin/sh -c '
    mkdir -p /dev/pts /dev/shm
    mount -t devpts -o newinstance,ptmxmode=0666 devpts /dev/pts
    mount -t tmpfs tmpfs /dev/shm
    mount -t tmpfs -o mode=1777 tmpfs /tmp
    mount -t tmpfs tmpfs /run
    /bin/bash "$1/target/vm/run/job.sh" </dev/null' sh "$wt"
sync
poweroff -f
EOF
    chmod +x "$ir/init"
    (cd "$ir" && find . | "$busybox" cpio -o -H newc 2>/dev/null | gzip -1) >"$initrd.tmp"
    mv "$initrd.tmp" "$initrd"
fi

# Build on this machine first: the guest only checks freshness.
if [ "$build" = 1 ] && [ "$1" = cargo ] && [ "${2:-}" = test ]; then
    pre=() post=()
    seen=0
    for a in "$@"; do
        if [ $seen = 0 ] && [ "$a" = -- ]; then seen=1; fi
        if [ $seen = 0 ]; then pre+=("$a"); else post+=("$a"); fi
    done
    (cd "$cwd" && "${pre[@]}" --no-run)
    (cd "$root" && cargo build -q -p hpcrun-rs -p hpcrun-preload -p hpcprof-rs -p hpcview-tui)
fi

# The job: environment, CPU facts, the command, its status.
run=$vm/run
mkdir -p "$run"
rm -f "$run/status"
{
    echo 'set -u'
    for v in PATH HOME CARGO_HOME RUSTUP_HOME RUSTUP_TOOLCHAIN CI RUST_BACKTRACE RUST_TEST_THREADS; do
        if [ -n "${!v+x}" ]; then printf 'export %s=%q\n' "$v" "${!v}"; fi
    done
    echo 'export CARGO_NET_OFFLINE=true'
    echo 'echo "vm: kernel $(uname -r), $(nproc) CPUs, $(grep -m1 "^model name" /proc/cpuinfo | cut -d: -f2-)"'
    echo 'echo "vm: vendor $(grep -m1 "^vendor_id" /proc/cpuinfo | cut -d: -f2- | tr -d " ")"'
    echo 'if grep -qw avx512f /proc/cpuinfo; then echo "vm: avx512f yes"; else echo "vm: avx512f no"; fi'
    echo 'echo "vm: flags $(grep -m1 "^flags" /proc/cpuinfo | cut -d: -f2-)"'
    echo 'echo "vm: $(LD_SHOW_AUXV=1 /bin/true | grep AT_MINSIGSTKSZ | tr -s " ")"'
    printf 'cd %q\n' "$cwd"
    echo 'start=$(date +%s)'
    printf '%q ' "$@"
    echo
    echo 'st=$?'
    echo 'echo "vm: exit status $st after $(( $(date +%s) - start )) s"'
    printf 'echo $st >%q\n' "$run/status"
} >"$run/job.sh"

qemu=(qemu-system-x86_64
    -accel tcg,thread=multi -smp "$smp" -m "$mem" -cpu "$cpu"
    -nographic -no-reboot -net none
    -kernel "$vmlinuz" -initrd "$initrd"
    -append "console=ttyS0 quiet loglevel=3 panic=-1 vm.worktree=$root vm.hostname=$(hostname)"
    -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap
    -virtfs "local,path=$root,mount_tag=worktree,security_model=none,multidevs=remap")
echo "run-in-vm.sh: -cpu $cpu -smp $smp -m $mem, kernel $kver: $*" >&2
t0=$(date +%s)
set +e
if [ "$timeout_s" != 0 ]; then
    timeout --foreground -k 10 "$timeout_s" "${qemu[@]}" </dev/null
else
    "${qemu[@]}" </dev/null
fi
set -e
echo "run-in-vm.sh: VM ran $(($(date +%s) - t0)) s" >&2
if ! [ -s "$run/status" ]; then
    echo "run-in-vm.sh: the VM ended without the command's exit status (console output above)" >&2
    exit 125
fi
exit "$(cat "$run/status")"
