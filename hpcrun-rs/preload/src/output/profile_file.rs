//! Writing a thread's profile file so that it is never torn: the bytes go
//! to a temporary file (`.<name>.w<writer tid>.tmp`, which hpcprof-rs
//! ignores), which then takes the profile's name in one step.
//!
//! The first write of a thread *claims* a name with `link()`, which fails
//! if the name exists: a process that execs keeps its pid and main tid,
//! and the image before may have left `<base>.hpcrun`, so the next free
//! suffix (`<base>.1.hpcrun`, ...) is taken, as before checkpoints. Later
//! writes (the next checkpoint, the final profile) `rename()` over the
//! claimed name. A SIGKILL at any moment leaves the last complete file.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use formats::measurement::{ThreadProfile, EXTENSION};

use crate::sys;
use crate::threads::run::warn;
use crate::threads::ThreadState;

/// `<dir>/<exe>.<host>.[r<rank>.]<pid>.<tid>` of a profile.
fn base_name(dir: &str, profile: &ThreadProfile) -> String {
    let exe = profile
        .process
        .exe
        .rsplit('/')
        .next()
        .filter(|s| !s.is_empty())
        .unwrap_or("process");
    let rank = profile
        .process
        .rank
        .map(|r| format!("r{r}."))
        .unwrap_or_default();
    format!(
        "{dir}/{exe}.{}.{rank}{}.{}",
        profile.process.host, profile.process.pid, profile.thread.tid
    )
}

/// Writes `profile` (of `state`'s thread) into `dir`, replacing the file
/// this thread wrote before; returns the bytes written (0 on failure,
/// which is warned about, never fatal).
pub fn write(state: &ThreadState, dir: &str, profile: &ThreadProfile) -> usize {
    // A write past the file-size limit fails (EFBIG) and the file is told
    // lost, without the SIGXFSZ that would end the program.
    let _quiet = sys::file_limits::QuietFsize::new();
    let written = write_file(state, dir, profile);
    // The run manifest tells final profiles written and lost (a failed
    // checkpoint is not a loss yet: a later one or the final may land).
    if profile.stats.checkpoints == 0 {
        match &written {
            Ok(_) => crate::output::manifest::wrote_final(state.index, state.tid),
            Err(reason) => crate::output::manifest::lost(state.index, state.tid, reason),
        }
    }
    written.unwrap_or(0)
}

/// [`write`]'s file; the reason (warned about) on failure.
fn write_file(state: &ThreadState, dir: &str, profile: &ThreadProfile) -> Result<usize, String> {
    let base = base_name(dir, profile);
    let stem = base.rsplit('/').next().unwrap_or("profile");
    let tmp = format!("{dir}/.{stem}.w{}.tmp", sys::gettid());
    let written = match encode_into(&tmp, profile) {
        Ok(n) => n,
        Err((e, code)) => {
            let line = format!(
                "could not write the profile of thread {} to {tmp}: {e}",
                state.tid
            );
            // Checkpoints past the file-size limit would fail the same
            // way at every interval: said once (each final profile lost
            // is said).
            if profile.stats.checkpoints != 0 && code == Some(libc::EFBIG) {
                static TOLD: AtomicBool = AtomicBool::new(false);
                if !TOLD.swap(true, Relaxed) {
                    warn(&format!(
                        "{line} (checkpoint; later ones past the limit are not said)"
                    ));
                }
            } else {
                warn(&line);
            }
            let _ = sys::outdir::remove(&tmp);
            return Err(e);
        }
    };
    if let Some(path) = state.file.get() {
        if let Err(e) = sys::outdir::rename(&tmp, path) {
            warn(&format!("could not rename {tmp} to {path}: {e}"));
            let _ = sys::outdir::remove(&tmp);
            return Err(e.to_string());
        }
        return Ok(written);
    }
    for attempt in 0..100 {
        let path = if attempt == 0 {
            format!("{base}.{EXTENSION}")
        } else {
            format!("{base}.{attempt}.{EXTENSION}")
        };
        match sys::outdir::hard_link(&tmp, &path) {
            Ok(()) => {
                let _ = sys::outdir::remove(&tmp);
                let _ = state.file.set(path);
                return Ok(written);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            // A file system without hard links: take the name if it is
            // free (not atomic against another process, but only an exec'd
            // image of this same pid and tid could want it).
            Err(_) if !sys::outdir::exists(&path) => {
                if let Err(e) = sys::outdir::rename(&tmp, &path) {
                    warn(&format!("could not rename {tmp} to {path}: {e}"));
                    let _ = sys::outdir::remove(&tmp);
                    return Err(e.to_string());
                }
                let _ = state.file.set(path);
                return Ok(written);
            }
            Err(_) => continue,
        }
    }
    let _ = sys::outdir::remove(&tmp);
    warn(&format!("could not find a free file name for {base}"));
    Err(format!("no free file name for {base}"))
}

/// Encodes `profile` into a new file at `path` through a 64 KiB buffer
/// (the whole file is never in memory: for a long allocation log it is
/// megabytes); returns its size, or the reason and the system's error
/// code.
fn encode_into(path: &str, profile: &ThreadProfile) -> Result<usize, (String, Option<i32>)> {
    let told = |e: &std::io::Error| (sys::file_limits::describe(e), e.raw_os_error());
    let file = sys::outdir::open(path, libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC)
        .map_err(|e| told(&e))?;
    let file = sys::file_above_floor(file);
    let mut out = Counted {
        inner: std::io::BufWriter::with_capacity(64 << 10, file),
        bytes: 0,
        failed: None,
    };
    // (The encoder's error wraps the file's: told as the file's, which
    // names the file-size limit when that is the cause.)
    profile.write_to(&mut out).map_err(|e| match out.failed {
        Some(code) => told(&std::io::Error::from_raw_os_error(code)),
        None => (e.to_string(), None),
    })?;
    let file = out.inner.into_inner().map_err(|e| told(e.error()))?;
    drop(file);
    Ok(out.bytes)
}

/// A writer that counts the bytes it passes on, and keeps the system's
/// error code of a write that failed.
struct Counted<W> {
    inner: W,
    bytes: usize,
    failed: Option<i32>,
}

impl<W: std::io::Write> std::io::Write for Counted<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf).inspect_err(|e| {
            self.failed = self.failed.or(e.raw_os_error());
        })?;
        self.bytes += n;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}
