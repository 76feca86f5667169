//! `hpcrun-rs`: runs a program under the data-centric memory profiler.
//!
//! It finds the preload library (`libhpcrun_preload.so`, next to this
//! executable or named by `HPCRUN_PRELOAD`), puts it first in `LD_PRELOAD`,
//! passes the configuration in `HPCRUN_*` environment variables, runs the
//! command (forwarding SIGTERM, SIGINT, SIGHUP, SIGUSR1 and SIGUSR2 to it)
//! and exits as the command did: with its exit status, or killed by the
//! same signal. Each thread of each process writes one
//! measurement file into the output directory.
//!
//! ```sh
//! hpcrun-rs -e mem:soft -o measurements ./app args...
//! ```

mod descendants;
mod events;
mod inherited;
mod launch;
mod marker;
mod notices;
mod pmu;
mod signals;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// The public C header for labels from the program (`--print-header`).
const HEADER: &str = include_str!("../include/hpcrun.h");

/// The end of `--help`: the events (from `hpcrun_abi::event_doc`, the
/// table `--list-events` and docs/GUIDE.md are written from), the output,
/// the forwarded signals and the exit status, in 80 columns.
fn long_help() -> String {
    let mut text = hpcrun_abi::event_doc::help_section(80);
    text.push_str(
        "\nOUTPUT:\n  One file per thread, DIR/<exe>.<host>[.r<rank>].<pid>.<tid>.hpcrun.\n  \
         Merge them with `hpcprof-rs DIR`.\n\nSIGNALS:\n  SIGTERM, SIGINT, SIGHUP, SIGUSR1 and \
         SIGUSR2 sent to hpcrun-rs are forwarded to\n  the command.\n\nEXIT STATUS:\n  The \
         command's exit status; killed by the same signal if the command was (a\n  shell shows \
         128+N); 2 for usage errors and commands that cannot start.",
    );
    text
}

/// The end of `-h`: the events' names (`--help` describes them).
fn short_help() -> String {
    let names: Vec<&str> = hpcrun_abi::event_doc::DOCS
        .iter()
        .map(|d| d.event.name())
        .collect();
    format!(
        "EVENTS: {} (--help describes them; --list-events tells what this machine supports)",
        names.join(", ")
    )
}

/// Measure a program: which data its memory accesses go to, and from where.
#[derive(Debug, Parser)]
#[command(
    name = "hpcrun-rs",
    version,
    term_width = 80,
    after_help = short_help(),
    after_long_help = long_help()
)]
struct Args {
    /// Sample source, optionally with a period; repeatable (one timer source
    /// plus page-faults): mem:soft, mem:soft@250000, -e mem:soft -e page-faults.
    #[arg(short = 'e', long = "event", value_name = "EVENT[@PERIOD]")]
    events: Vec<String>,

    /// Offset histogram of each data object: N equal buckets over the
    /// object, `cacheline` (64-byte buckets), `page` (4 KiB) or `bytes:N`.
    #[arg(long, value_name = "LAYOUT", default_value = "32", value_parser = parse_histogram)]
    histogram: String,

    /// Record NUMA locality (numa_local / numa_remote) even on a machine
    /// with one node (it is recorded by default with several nodes).
    #[arg(long)]
    numa: bool,

    /// Output directory (created if missing; must not hold another run's files).
    #[arg(
        short = 'o',
        long = "output",
        value_name = "DIR",
        default_value = "measurements"
    )]
    output: PathBuf,

    /// Smallest heap block (bytes) tracked with a record of its own (allocation log, per-block
    /// times). Smaller blocks are tracked too, every one, in a compact map at their allocation
    /// site: by call path, or an MPI or OpenMP runtime's by the allocating instruction.
    #[arg(long, value_name = "BYTES", default_value_t = 1024)]
    min_bytes: usize,

    /// The most memory the map of small blocks may take inside the program (e.g. 256MiB; about
    /// 20 bytes a live block). Default: 64 MiB or half the bytes of the live small blocks,
    /// whichever is more. Blocks past it are counted, by reason, in the report and the viewer.
    #[arg(long, value_name = "SIZE", value_parser = formats::advice::parse_size)]
    max_tracking_memory: Option<u64>,

    /// Also keep a record of every tracked heap block (address, size,
    /// allocation site, allocation and free times) and write each thread's
    /// records in its profile, as an allocation log for your own scripts
    /// (hpcprof-rs does not read it). Off by default: it costs a record and
    /// about 90 bytes of profile per allocation.
    #[arg(long)]
    alloc_log: bool,

    /// The timer behind mem:soft and cpu-time, both on each thread's user
    /// CPU time: `cpu-timer`, a POSIX timer (as HPCToolkit's CPUTIME;
    /// checked at the kernel's tick, 1-4 ms: a finer period gives one
    /// sample per tick that counts for the periods it stands for; nothing
    /// to do at a context switch), or `task-clock`, a perf event per thread
    /// (exact periods; a kernel timer restarted at every context switch).
    /// `auto`: cpu-timer for periods of 1 ms or more, else task-clock.
    #[arg(long, value_name = "KIND", default_value = "auto", value_parser = ["auto", "cpu-timer", "task-clock"])]
    timer: String,

    /// Refuse to fall back to another event when the requested one is unavailable.
    #[arg(long)]
    strict: bool,

    /// Real-time signal for samples, as an offset from SIGRTMIN (pick another
    /// if the program uses SIGRTMIN+4 itself).
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(i32).range(0..=15))]
    signal: i32,

    /// Rewrite every thread's profile every SECS seconds of wall time while
    /// the program runs (the first time one second after start), so that a run that is killed (SIGKILL: a batch
    /// time limit, the OOM killer) keeps what was measured up to the last
    /// checkpoint; 0 disables. Each write replaces the previous one
    /// atomically; the final profile replaces the last checkpoint.
    #[arg(long, value_name = "SECS", default_value = "10", value_parser = parse_checkpoint)]
    checkpoint: String,

    /// List the events and whether this machine supports them, then exit.
    #[arg(long)]
    list_events: bool,

    /// Print the C header `hpcrun.h` (hpcrun_label, hpcrun_register,
    /// hpcrun_unregister: name your program's data), then exit.
    #[arg(long)]
    print_header: bool,

    /// The program to run, and its arguments.
    #[arg(
        required_unless_present_any = ["list_events", "print_header"],
        trailing_var_arg = true,
        value_name = "COMMAND"
    )]
    command: Vec<String>,
}

fn parse_histogram(s: &str) -> Result<String, String> {
    // The grammar the library reads (`hpcrun-abi`); an empty value would
    // mean the default there, here it is an error.
    if !s.is_empty() && s.trim() == s && hpcrun_abi::histogram::parse(s).is_some() {
        Ok(s.to_string())
    } else {
        Err("expected a bucket count (1-65536), cacheline, page or bytes:N".into())
    }
}

fn parse_checkpoint(s: &str) -> Result<String, String> {
    match hpcrun_abi::config::parse_checkpoint(s) {
        Some(_) if s.trim() == s => Ok(s.to_string()),
        _ => Err("expected seconds (e.g. 10, 0.5), or 0 to disable checkpoints".into()),
    }
}

/// Writes one line to stderr; a closed or full stderr is not an error
/// (`hpcrun-rs ./app 2>&1 | head -1` must end as the program does).
pub fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// Writes `text` to stdout; a closed pipe is fine.
fn print_out(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}

/// The stack of the thread the launcher works on.
const LAUNCHER_STACK: usize = 8 << 20;

fn main() -> ExitCode {
    // Before any thread exists: forwarded signals are taken by one thread.
    signals::block();
    // The launcher's work needs more stack than a small `ulimit -s` (the
    // shell's, which sets the hard limit too, and under which the program
    // may run natively) leaves the main thread: it runs on a thread whose
    // stack is its own size.
    let worker = std::thread::Builder::new()
        .name("hpcrun-rs".into())
        .stack_size(LAUNCHER_STACK)
        .spawn(launcher);
    match worker {
        Ok(handle) => handle
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
        Err(_) => launcher(),
    }
}

/// The launcher: parses the arguments, runs the program and ends as it
/// ended.
fn launcher() -> ExitCode {
    let args = Args::parse();
    if args.print_header {
        print_out(HEADER);
        return ExitCode::SUCCESS;
    }
    if args.list_events {
        print_out(&events::list(std::path::Path::new("/")));
        return ExitCode::SUCCESS;
    }
    match launch::run(&args) {
        Ok(ended) => signals::exit_like(ended),
        Err(e) => {
            say(&format!("hpcrun-rs: error: {e:#}"));
            ExitCode::from(2)
        }
    }
}
