//! Processes of the run that outlive the program: a daemon (fork,
//! `setsid`, fork; the first two exit at once), a background job of a
//! script. The launcher is their subreaper (`PR_SET_CHILD_SUBREAPER`):
//! when the process between them and the launcher ends, they become the
//! launcher's children instead of init's. Once the program has ended,
//! [`wait_for_the_rest`] waits for every one of them, as `strace -f`
//! does, so that the closing line counts their profiles and a directory
//! they may still write to is never taken for an empty one. SIGINT,
//! SIGTERM or SIGHUP to the launcher while it waits (Ctrl-C, `timeout`,
//! a batch system) stop the waiting: those processes keep running and
//! write their profiles when they end ([`crate::signals`]).

use std::time::{Duration, Instant};

use crate::{say, signals};

/// Makes this process the subreaper of its descendants (before the
/// program is started). False where the kernel refuses.
pub fn become_subreaper() -> bool {
    // SAFETY: prctl with an option and integer arguments.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0 }
}

/// A process of the run still running: its pid and command name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Running {
    pub pid: u32,
    pub name: String,
}

/// How long the launcher waits before it says it is waiting.
const TELL_AFTER: Duration = Duration::from_secs(1);

/// After the program ended: reaps this launcher's children (the
/// program's descendants that outlived it, handed to the launcher as
/// their subreaper) until none is left, or until a signal stops the
/// waiting; returns those still running then (empty: all ended). Says
/// once, after a second, what it waits for.
pub fn wait_for_the_rest(program: &str) -> Vec<Running> {
    let start = Instant::now();
    let mut told = false;
    loop {
        if !reap_ended() {
            return Vec::new();
        }
        if signals::stop_waiting() {
            return running_children();
        }
        if !told && start.elapsed() >= TELL_AFTER {
            told = true;
            let running = running_children();
            if !running.is_empty() {
                say(&format!(
                    "hpcrun-rs: {program} ended; waiting for {} of the run that outlived it ({}) to end, to count their profiles (Ctrl-C or SIGTERM to hpcrun-rs stops waiting; they still write their profiles when they end)",
                    processes(running.len()),
                    list(&running)
                ));
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Reaps every child that ended; false when no child is left.
fn reap_ended() -> bool {
    loop {
        let mut status = 0;
        // SAFETY: waitpid with an out-parameter of the right type.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        match pid {
            0 => return true,
            p if p > 0 => continue,
            _ => match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) => continue,
                _ => return false, // ECHILD
            },
        }
    }
}

/// This process's children that run (from `/proc/*/stat`).
fn running_children() -> Vec<Running> {
    let me = std::process::id();
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let mut rest = stat[close + 1..].split_whitespace();
        let state = rest.next().unwrap_or("");
        let ppid = rest.next().and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(me) && state != "Z" {
            found.push(Running {
                pid,
                name: stat[open + 1..close].to_string(),
            });
        }
    }
    found.sort_by_key(|r| r.pid);
    found
}

/// "1 process", "3 processes".
pub fn processes(n: usize) -> String {
    if n == 1 {
        "1 process".to_string()
    } else {
        format!("{n} processes")
    }
}

/// "pid 12 (name), pid 13 (name)", the first few.
pub fn list(running: &[Running]) -> String {
    let mut text: Vec<String> = running
        .iter()
        .take(5)
        .map(|r| format!("pid {} ({})", r.pid, r.name))
        .collect();
    if running.len() > 5 {
        text.push(format!("{} more", running.len() - 5));
    }
    text.join(", ")
}
