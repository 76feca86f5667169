//! What the harness measured: the tools, one run's numbers, the runs of
//! a workload (a series), and the statistics over them (medians, the
//! bootstrap interval of a median).

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    Native,
    Hpcrun,
    Perf,
    /// Same event and signal as hpcrun-rs, empty handler.
    Floor,
    /// Another hpcrun-rs build (`--baseline`), run the same way as
    /// hpcrun-rs: a change's before and after in the same rounds.
    Baseline,
}

impl Tool {
    pub fn name(self) -> &'static str {
        match self {
            Tool::Native => "native",
            Tool::Hpcrun => "hpcrun-rs",
            Tool::Perf => "perf",
            Tool::Floor => "floor",
            Tool::Baseline => "baseline",
        }
    }

    /// An hpcrun-rs build (this one or the baseline): its own period, and
    /// its profiles are read for samples, handler and hook time.
    pub fn is_hpcrun(self) -> bool {
        matches!(self, Tool::Hpcrun | Tool::Baseline)
    }
}

/// One run's measurements.
#[derive(Debug, Clone, Copy, Default)]
pub struct Run {
    pub wall: f64,
    pub cpu: f64,
    pub samples: u64,
    pub bytes: u64,
    /// hpcrun-rs only: the profiler's own time inside the program, from
    /// the profiles' counters (ns): every sample's handler, and the
    /// allocation hooks (estimated from one call in 16).
    pub handler_ns: u64,
    pub hook_ns: u64,
}

/// Everything measured for one workload: runs[tool][round].
pub struct Series {
    pub name: String,
    pub runs: Vec<(Tool, Vec<Run>)>,
}

impl Series {
    pub fn of(&self, tool: Tool) -> Option<&[Run]> {
        self.runs
            .iter()
            .find(|(t, _)| *t == tool)
            .map(|(_, r)| &r[..])
    }
}

pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    let n = values.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

pub fn med(runs: &[Run], f: fn(&Run) -> f64) -> f64 {
    let mut v: Vec<f64> = runs.iter().map(f).collect();
    median(&mut v)
}

/// The 2.5th and 97.5th percentiles of the median of `values`, by a
/// percentile bootstrap of 2,000 resamples (fixed-seed [`benches::Rng`]:
/// the same input gives the same interval).
pub fn bootstrap_median_ci(values: &[f64]) -> (f64, f64) {
    if values.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let mut rng = benches::Rng::new(0x9e37_79b9_7f4a_7c15);
    let mut medians: Vec<f64> = (0..2000)
        .map(|_| {
            let mut sample: Vec<f64> = (0..values.len())
                .map(|_| values[rng.below(values.len() as u64) as usize])
                .collect();
            median(&mut sample)
        })
        .collect();
    medians.sort_by(|a, b| a.total_cmp(b));
    (medians[50], medians[1949])
}
