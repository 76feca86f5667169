//! The input of a merge: profiles already decoded (tests, benchmarks) or
//! measurement files read and decoded on demand, one at a time per worker.

use std::borrow::Cow;
use std::path::PathBuf;

use formats::measurement::ThreadProfile;

/// How a merge gets its profiles.
pub(super) struct Input<'a> {
    /// Profile `i`, or why it cannot be used.
    pub(super) load: &'a (dyn Fn(usize) -> Result<Cow<'a, ThreadProfile>, String> + Sync),
    /// Name of input `i` for the skipped list.
    pub(super) name: &'a (dyn Fn(usize) -> String + Sync),
}

/// The process part of a measurement file name (`<exe>.<host>.<pid>` of
/// `<exe>.<host>.<pid>.<tid>.hpcrun`): files of one process share it.
pub(super) fn process_of_file(path: &std::path::Path) -> String {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    match stem.rsplit_once('.') {
        Some((process, _tid)) => process.to_string(),
        None => stem,
    }
}

/// Runs `f` with an [`Input`] that reads and decodes `files`, reporting
/// each file's size to `progress`.
pub(super) fn with_file_input<T>(
    files: &[PathBuf],
    progress: &(dyn Fn(u64) + Sync),
    f: impl FnOnce(&Input<'_>) -> T,
) -> T {
    let load = |i: usize| -> Result<Cow<'_, ThreadProfile>, String> {
        // One read buffer per worker, reused: a fresh profile-sized block
        // per file would be mapped, faulted in and unmapped every time.
        thread_local! {
            static BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        BUFFER.with_borrow_mut(|bytes| {
            bytes.clear();
            let read = std::fs::File::open(&files[i]).and_then(|mut f| {
                use std::io::Read;
                f.read_to_end(bytes)
            });
            progress(bytes.len() as u64);
            read.map_err(|e| format!("cannot read: {e}"))?;
            ThreadProfile::from_bytes(bytes)
                .map(Cow::Owned)
                .map_err(|e| e.to_string())
        })
    };
    let name = |i: usize| files[i].display().to_string();
    let input = Input {
        load: &load,
        name: &name,
    };
    f(&input)
}
