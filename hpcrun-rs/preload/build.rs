//! Build script of the preload library: links the unwinder that Rust's
//! panics use (GCC's `libgcc_eh.a`) into `libhpcrun_preload.so` instead
//! of depending on `libgcc_s.so.1`.
//!
//! Every process the profiler measures loads the library; with
//! `libgcc_s` it also loads that library, relocates it and runs its
//! constructor, whose CPUID instructions trap to the hypervisor in a
//! virtual machine: about a fifth of what the library added to a tiny
//! child's CPU time (docs/PERFORMANCE.md, "Short-lived children"). The
//! unwinder linked in is the library's own: its symbols stay local (the
//! cdylib exports only its hooks), so a C++ program's exceptions keep
//! going through the system's `libgcc_s`.
//!
//! How: Rust's standard library asks the linker for `-lgcc_s`; a
//! directory searched first holds a `libgcc_s.so` that is a linker
//! script naming `libgcc_eh.a` (by the full path the C compiler gives).
//! Where the compiler has no `libgcc_eh.a` (or the target is not Linux
//! with glibc, or it is cross-compiled) nothing changes: the library
//! depends on `libgcc_s` as before.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CC");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    if var("CARGO_CFG_TARGET_OS") != "linux"
        || var("CARGO_CFG_TARGET_ENV") != "gnu"
        || var("TARGET") != var("HOST")
    {
        return;
    }
    let Some(archive) = libgcc_eh() else {
        println!(
            "cargo:warning=no libgcc_eh.a from the C compiler: libhpcrun_preload.so depends on libgcc_s.so.1"
        );
        return;
    };
    let dir = PathBuf::from(var("OUT_DIR")).join("static-unwinder");
    let script = format!(
        "/* -lgcc_s for libhpcrun_preload.so: the unwinder linked in (build.rs) */\nINPUT ( \"{}\" )\n",
        archive.display()
    );
    let written = std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(dir.join("libgcc_s.so"), script));
    if let Err(e) = written {
        println!(
            "cargo:warning=cannot write {}: {e}; libhpcrun_preload.so depends on libgcc_s.so.1",
            dir.display()
        );
        return;
    }
    // Only the cdylib: the rlib's users (benchmarks) link as usual.
    println!("cargo:rustc-cdylib-link-arg=-L{}", dir.display());
}

/// The full path of the C compiler's `libgcc_eh.a`, if it has one.
fn libgcc_eh() -> Option<PathBuf> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let out = Command::new(cc)
        .arg("-print-file-name=libgcc_eh.a")
        .output()
        .ok()?;
    let path = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    // Not found, the compiler prints the bare name back.
    (out.status.success() && path.is_absolute() && path.is_file()).then_some(path)
}
