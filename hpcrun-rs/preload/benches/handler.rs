//! The pieces of the sample signal handler, one by one and together, on
//! real code and a real stack (this benchmark's own process):
//!
//! * `decode/*`: finding the instruction before the interrupted IP (forward
//!   decode from the function start, the per-thread cache, the backward
//!   guess), decoding it and computing its effective address from the
//!   registers, and the look-ahead used after a pointer-chasing load;
//!   `decode/analyse_new_ip_20KB/*`: a sample at a new IP at the end of a
//!   20 KB function, decoding from the function's start (no anchor yet, the
//!   first sample in that part of the function) or from the closest anchor
//!   (`anchors`: every later new IP);
//! * `classify/*`: which data object an address belongs to (heap object
//!   map hit, static variable, the thread's stack, unknown);
//! * `cct/*`: inserting a call path into the thread's calling-context tree
//!   (existing path: the steady state);
//! * `unwind/*`: framehop unwinding of this thread's real stack from a point
//!   N recursive calls deep (plus criterion's own frames);
//! * `sample/*`: the handler's whole `sample()` (everything above) at that
//!   point, where the previous instruction is a load from a tracked heap
//!   block; `sample_cold/*` the same after streaming through 8 MiB or
//!   128 MiB of other memory (what a memory-bound program does between two
//!   samples);
//! * `signal/*`: the kernel's part: delivering a real-time signal to this
//!   thread and returning from an empty handler.
//!
//! `cargo bench -p hpcrun-preload --bench handler`. Results in
//! docs/PERFORMANCE.md.

use std::arch::asm;
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};
use hpcrun_preload::access::soft::{self, Regs};
use hpcrun_preload::cct::{self, Tree};
use hpcrun_preload::code::{modules, unwind};
use hpcrun_preload::sys::StackBounds;
use hpcrun_preload::{access::anchors, objects, sys, threads};
use hpcrun_preload::{sample::attribute, sample::handler};

// A 20,000-byte function (5,000 x `add rax, 1`) ending in a load; the
// label after the load is the IP a sample of that load interrupts.
std::arch::global_asm!(
    ".text",
    ".globl hpcrun_bench_big_function",
    ".type hpcrun_bench_big_function,@function",
    "hpcrun_bench_big_function:",
    ".rept 5000",
    "add rax, 1",
    ".endr",
    "mov rax, [rdi]",
    ".globl hpcrun_bench_big_function_after_load",
    "hpcrun_bench_big_function_after_load:",
    "ret",
    ".size hpcrun_bench_big_function, .-hpcrun_bench_big_function",
);

extern "C" {
    fn hpcrun_bench_big_function_after_load();
}

/// RDI's index in `Regs::gpr`.
const RDI: usize = 7;

/// The interrupted state at a point right after a load through RDI, inside
/// a call chain `depth` calls deep: (registers, RSP, RBP).
type Point = (Regs, u64, u64);

/// Calls itself `depth` times, then runs `f` with the registers of the
/// point just after `mov rax, [rdi]` (RDI = `ptr`), as a signal would see
/// them with the measured skid (the IP after the load).
#[inline(never)]
fn at_depth(depth: u32, ptr: u64, f: &mut dyn FnMut(Point)) -> u64 {
    if depth > 0 {
        let r = at_depth(depth - 1, ptr, f);
        // Work after the call: no tail call, the frame stays.
        return black_box(r).wrapping_add(1);
    }
    let (pc, sp, bp): (u64, u64, u64);
    // SAFETY: reads RIP (of the label after the load), RSP and RBP, and
    // loads 8 bytes from `ptr`, which the caller points at a live block.
    unsafe {
        asm!(
            "lea {pc}, [rip + 2f]",
            "mov {sp}, rsp",
            "mov {bp}, rbp",
            "mov rax, qword ptr [rdi]",
            "2:",
            pc = out(reg) pc,
            sp = out(reg) sp,
            bp = out(reg) bp,
            in("rdi") ptr,
            out("rax") _,
        );
    }
    let mut regs = Regs::default();
    regs.gpr[RDI] = ptr;
    regs.gpr[4] = sp; // RSP
    regs.gpr[5] = bp; // RBP
    regs.rip = pc;
    f((regs, sp, bp));
    0
}

/// A static variable (in `.rodata`) for the static-data lookup.
static STATIC_TABLE: [u64; 64] = [7; 64];

fn handler_benches(c: &mut Criterion) {
    // What the library's start-up does before the first sample.
    assert!(objects::init(false, 0));
    modules::refresh(None);
    // The snapshot and unwinder stay valid while a read section is open;
    // nothing replaces them during the benchmarks, so one section serves all.
    let _section = sys::reading();
    let snap = modules::get().expect("module snapshot");
    soft::warm_up();
    let unwinder = unwind::get().expect("unwinder");
    let state = threads::start_current(threads::next_index(), 1 << 16).expect("thread state");
    let objs = objects::get().expect("object map");

    // A tracked heap block (the object the sampled load reads).
    let block = vec![1u64; 512].leak();
    let block_addr = block.as_ptr() as u64;
    let site = objs.site(&[0x1000, 0x2000, 0x3000]).unwrap();
    objs.insert(block_addr, 4096, site, 0, 0);

    let mut decode = c.benchmark_group("decode");
    at_depth(0, block_addr + 8, &mut |(regs, _, _)| {
        let ip = regs.rip;
        let (seg_start, seg_end) = snap.exec_segment(ip).expect("segment");
        // SAFETY: an executable segment of a loaded module of the snapshot.
        let code = unsafe { sys::loaded_bytes(&[(seg_start, seg_end, true)], seg_start, seg_end) }
            .unwrap();
        let func = snap.function_start(ip).expect("function start");
        let prev = soft::previous_by_forward_decode(code, seg_start, func, ip).expect("previous");
        decode.bench_function(
            BenchmarkId::new("previous_forward", format!("{}B_from_start", ip - func)),
            |b| {
                b.iter(|| {
                    soft::previous_by_forward_decode(
                        code,
                        seg_start,
                        black_box(func),
                        black_box(ip),
                    )
                })
            },
        );
        threads::cache_previous(state, ip, prev);
        decode.bench_function("previous_cached", |b| {
            b.iter(|| threads::cached_previous(state, black_box(ip)))
        });
        decode.bench_function("previous_backward_guess", |b| {
            b.iter(|| soft::previous_by_backward_guess(code, seg_start, black_box(ip)))
        });
        decode.bench_function("decode_and_address", |b| {
            b.iter(|| {
                let insn = soft::decode_at(code, seg_start, black_box(prev)).unwrap();
                soft::access(&insn, black_box(&regs), true)
            })
        });
        decode.bench_function("next_access_lookahead", |b| {
            b.iter(|| soft::next_access(code, seg_start, black_box(ip), black_box(&regs)))
        });
        decode.bench_function("analyse_cached", |b| {
            b.iter(|| attribute::analyse(state, snap, black_box(&regs), 0))
        });
    });
    // A new IP deep in a 20 KB function.
    let mut big = Regs {
        rip: hpcrun_bench_big_function_after_load as *const () as u64,
        ..Default::default()
    };
    big.gpr[RDI] = block_addr + 8;
    assert!(anchors::init());
    let a = attribute::analyse(state, snap, &big, 0).leaf;
    assert_eq!(big.rip - a, 3, "the load before the label");
    decode.bench_function("analyse_new_ip_20KB/from_function_start", |b| {
        b.iter_batched(
            || {
                anchors::clear();
                threads::forget_previous(state, big.rip);
            },
            |()| attribute::analyse(state, snap, black_box(&big), 0),
            BatchSize::PerIteration,
        )
    });
    decode.bench_function("analyse_new_ip_20KB/from_anchor", |b| {
        b.iter_batched(
            || threads::forget_previous(state, big.rip),
            |()| attribute::analyse(state, snap, black_box(&big), 0),
            BatchSize::PerIteration,
        )
    });
    decode.finish();

    let mut classify = c.benchmark_group("classify");
    let stack_addr = &block as *const _ as u64;
    for (name, addr) in [
        ("heap_hit", block_addr + 100),
        ("static", STATIC_TABLE.as_ptr() as u64 + 16),
        ("own_stack", stack_addr),
        ("unknown", 0x10),
    ] {
        classify.bench_function(name, |b| {
            b.iter(|| handler::classify(state, snap, black_box(addr), None))
        });
    }
    classify.finish();

    let mut tree_group = c.benchmark_group("cct");
    let tree = Tree::new(1 << 16).unwrap();
    for depth in [12usize, 50] {
        let path: Vec<u64> = (0..depth as u64).map(|i| 0x40_0000 + i * 0x40).collect();
        tree.path(cct::CODE, path.iter().copied()).unwrap();
        tree_group.bench_with_input(
            BenchmarkId::new("existing_path", depth),
            &path,
            |b, path| {
                b.iter(|| {
                    let leaf = tree
                        .path(cct::CODE, black_box(path).iter().copied())
                        .unwrap();
                    tree.add(leaf, cct::M_SAMPLES, 1);
                })
            },
        );
    }
    tree_group.finish();

    let stack = StackBounds::current(sys::stack_address()).expect("stack bounds");
    let mut unwind_group = c.benchmark_group("unwind");
    for depth in [10u32, 50] {
        at_depth(depth, block_addr + 8, &mut |(regs, sp, bp)| {
            let mut cache = unwind::Cache::new_in();
            let mut frames = [0u64; handler::MAX_FRAMES];
            let got = unwind::unwind(unwinder, &mut cache, &stack, regs.rip, sp, bp, &mut frames);
            assert!(got.len as u32 > depth, "unwound {} frames", got.len);
            let id = format!("{depth}_deep_{}_frames", got.len);
            unwind_group.bench_function(BenchmarkId::new("real_stack", id), |b| {
                b.iter(|| {
                    unwind::unwind(
                        unwinder,
                        &mut cache,
                        &stack,
                        black_box(regs.rip),
                        sp,
                        bp,
                        &mut frames,
                    )
                })
            });
        });
    }
    unwind_group.finish();

    let mut sample_group = c.benchmark_group("sample");
    for depth in [10u32, 50] {
        at_depth(depth, block_addr + 8, &mut |point| {
            let recovered = || {
                state
                    .stats
                    .recovered
                    .load(std::sync::atomic::Ordering::Relaxed)
            };
            let before = recovered();
            handler::sample(state, point, 1);
            let dropped: Vec<u64> = state
                .stats
                .dropped
                .iter()
                .map(|d| d.load(std::sync::atomic::Ordering::Relaxed))
                .collect();
            assert_eq!(
                recovered(),
                before + 1,
                "the sample did not recover the address (dropped: {dropped:?}, tree {})",
                state.tree.len()
            );
            sample_group.bench_function(
                BenchmarkId::new("heap_load", format!("{depth}_deep")),
                |b| b.iter(|| handler::sample(state, black_box(point), 1)),
            );
        });
    }
    sample_group.finish();

    // The same sample when the program streamed through memory since the
    // last one (a memory-bound program between two samples 500 us apart):
    // every structure the handler reads comes from farther away. The
    // eviction runs outside the timed part; a short measurement time keeps
    // the number of evictions (setup) bounded.
    let mut cold_group = c.benchmark_group("sample_cold");
    cold_group
        .sample_size(10)
        .warm_up_time(std::time::Duration::from_millis(10))
        .measurement_time(std::time::Duration::from_millis(30));
    let mut junk = vec![0u8; 128 << 20];
    for (label, bytes) in [("after_8MiB", 8usize << 20), ("after_128MiB", 128 << 20)] {
        at_depth(10, block_addr + 8, &mut |point| {
            cold_group.bench_function(BenchmarkId::new("heap_load_10_deep", label), |b| {
                b.iter_batched(
                    || {
                        for i in (0..bytes).step_by(64) {
                            junk[i] = junk[i].wrapping_add(1);
                        }
                        black_box(&junk);
                    },
                    |()| handler::sample(state, black_box(point), 1),
                    BatchSize::PerIteration,
                )
            });
        });
    }
    cold_group.finish();

    // The kernel's share: a real-time signal to this thread, an empty handler.
    extern "C" fn empty(_: libc::c_int, _: *mut libc::siginfo_t, _: *mut libc::c_void) {}
    let signal = sys::sigrtmin() + 5;
    assert!(sys::install_handler(signal, empty, &[]).is_some());
    let mut signal_group = c.benchmark_group("signal");
    signal_group.bench_function("deliver_empty_handler", |b| {
        // SAFETY: the handler for `signal` is installed and does nothing.
        b.iter(|| unsafe { libc::raise(signal) })
    });
    signal_group.finish();
}

criterion_group!(benches, handler_benches);
criterion_main!(benches);
