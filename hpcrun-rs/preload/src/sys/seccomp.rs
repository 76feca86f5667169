//! Seccomp filters as the profiler sees them: the mode the process
//! started in (the `Seccomp:` line of `/proc/self/status`, read once at
//! load), what a filter the program is about to install does to calls it
//! does not allow ([`filter_refuses_by_killing`]: read from its BPF
//! program), and the raw system call the interposed `syscall` and
//! `prctl` forward to ([`raw_syscall6`]).

use std::ffi::c_long;

/// `SECCOMP_RET_ACTION_FULL`: the action bits of a filter's return value.
const RET_ACTION_FULL: u32 = 0xffff_0000;
const RET_ALLOW: u32 = 0x7fff_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const RET_LOG: u32 = 0x7ffc_0000;

/// BPF instruction classes and fields (linux/bpf_common.h).
const BPF_RET: u16 = 0x06;
const BPF_CLASS_MASK: u16 = 0x07;
const BPF_RVAL_MASK: u16 = 0x18;
const BPF_K: u16 = 0x00;

/// The seccomp mode of this process (0 none, 1 strict, 2 filter), from
/// the `Seccomp:` line of `/proc/self/status` (0 when unreadable).
pub fn mode_from_status() -> u32 {
    use std::io::Read;
    let Ok(mut file) = std::fs::File::open("/proc/self/status") else {
        return 0;
    };
    // Into a buffer on the stack (the file is about 1.5 KB): a few large
    // reads and no allocation (every process pays for this at start).
    let mut buf = [0u8; 8192];
    let mut len = 0;
    while len < buf.len() {
        match file.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(_) => return 0,
        }
    }
    buf[..len]
        .split(|&b| b == b'\n')
        .find_map(|l| l.strip_prefix(b"Seccomp:"))
        .and_then(|v| std::str::from_utf8(v).ok()?.trim().parse().ok())
        .unwrap_or(0)
}

/// True if the filter `prog` (a `struct sock_fprog *` the program passes
/// to `seccomp`/`prctl`) can answer a call with anything but "allow",
/// "log" or "fail with an errno": a kill, a trap (SIGSYS), a tracer's or
/// a supervisor's decision, or a value computed at run time. Then a call
/// the program did not expect ends it, and the profiler must make none.
/// An unreadable program counts as killing.
///
/// # Safety
/// `prog` is null or points to a `sock_fprog` whose `filter` holds `len`
/// instructions (what the kernel is about to read).
pub unsafe fn filter_refuses_by_killing(prog: *const libc::sock_fprog) -> bool {
    if prog.is_null() {
        return true;
    }
    // SAFETY: a valid `sock_fprog`, per the caller's contract (null was
    // handled above).
    let (len, filter) = unsafe { ((*prog).len as usize, (*prog).filter) };
    if filter.is_null() || len == 0 {
        return true;
    }
    // SAFETY: as above, `len` instructions at `filter`.
    let code = unsafe { std::slice::from_raw_parts(filter, len) };
    code.iter().any(|insn| {
        if insn.code & BPF_CLASS_MASK != BPF_RET {
            return false;
        }
        if insn.code & BPF_RVAL_MASK != BPF_K {
            return true; // Returns the accumulator: unknown here.
        }
        !matches!(insn.k & RET_ACTION_FULL, RET_ALLOW | RET_ERRNO | RET_LOG)
    })
}

/// A system call with up to six arguments, as glibc's `syscall()` makes
/// it: -1 with errno set on failure. Used by the interposed `syscall` and
/// `prctl` to forward the program's calls (and the library's own
/// `syscall()` calls, which bind to the interposed one).
///
/// # Safety
/// The call's own contract: the arguments are what system call `number`
/// expects (pointers valid for what it reads and writes).
pub unsafe fn raw_syscall6(number: c_long, args: [c_long; 6]) -> c_long {
    let ret: c_long;
    // SAFETY: the `syscall` instruction with the kernel's x86-64 calling
    // convention; it clobbers rcx and r11 (declared), the arguments'
    // validity is the caller's contract.
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") number => ret,
            in("rdi") args[0],
            in("rsi") args[1],
            in("rdx") args[2],
            in("r10") args[3],
            in("r8") args[4],
            in("r9") args[5],
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    if (-4095..0).contains(&ret) {
        super::set_errno(-ret as i32);
        return -1;
    }
    ret
}
