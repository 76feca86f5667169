//! Event names, periods and the fallback from hardware to software sampling.

use anyhow::{bail, Result};

/// The sample source that will actually run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chosen {
    pub name: &'static str,
    pub period: u64,
}

pub const DEFAULT_SOFT_PERIOD_NS: u64 = 500_000;

/// Why hardware memory sampling is unavailable on this machine.
pub fn hardware_unavailable_reason() -> String {
    let devices: Vec<String> = std::fs::read_dir("/sys/bus/event_source/devices")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    let has_pmu = devices
        .iter()
        .any(|d| d == "cpu" || d == "ibs_op" || d.starts_with("arm_spe") || d.starts_with("cpu_"));
    if has_pmu {
        "hardware memory sampling is not implemented in this version of hpcrun-rs".into()
    } else {
        format!(
            "no hardware PMU on this machine (a virtual machine or container?): /sys/bus/event_source/devices has only {}",
            devices.join(" ")
        )
    }
}

/// Parses the `-e` options; returns the event to run and notes for stderr.
pub fn choose(specs: &[String], strict: bool) -> Result<(Chosen, Vec<String>)> {
    let mut notes = Vec::new();
    let spec = match specs {
        [] => "mem:soft".to_string(),
        [one] => one.clone(),
        [first, ..] => {
            notes.push(format!(
                "only one event per run is supported in this version; using {first}"
            ));
            first.clone()
        }
    };
    let (name, period) = match spec.split_once('@') {
        Some((n, p)) => {
            let period: u64 = p.parse().ok().filter(|&p| p > 0).ok_or_else(|| {
                anyhow::anyhow!("bad period '{p}' in -e {spec}: expected a positive integer")
            })?;
            (n.to_string(), Some(period))
        }
        None => (spec.clone(), None),
    };
    match name.as_str() {
        "mem:soft" => Ok((
            Chosen {
                name: "mem:soft",
                period: period.unwrap_or(DEFAULT_SOFT_PERIOD_NS),
            },
            notes,
        )),
        "mem:latency" => {
            let reason = hardware_unavailable_reason();
            if strict {
                bail!("mem:latency is not available: {reason} (drop --strict to fall back to mem:soft)");
            }
            notes.push(format!(
                "mem:latency is not available ({reason}); running mem:soft instead"
            ));
            Ok((
                Chosen {
                    name: "mem:soft",
                    period: DEFAULT_SOFT_PERIOD_NS,
                },
                notes,
            ))
        }
        other => {
            bail!("unknown event '{other}' (known: mem:soft, mem:latency); see hpcrun-rs --help")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_mem_soft() {
        let (c, notes) = choose(&[], false).unwrap();
        assert_eq!(
            c,
            Chosen {
                name: "mem:soft",
                period: DEFAULT_SOFT_PERIOD_NS
            }
        );
        assert!(notes.is_empty());
    }

    #[test]
    fn period_is_parsed() {
        let (c, _) = choose(&["mem:soft@1000".into()], false).unwrap();
        assert_eq!(c.period, 1000);
        assert!(choose(&["mem:soft@x".into()], false).is_err());
        assert!(choose(&["mem:soft@0".into()], false).is_err());
    }

    #[test]
    fn unknown_event_is_an_error() {
        let e = choose(&["cycles".into()], false).unwrap_err().to_string();
        assert!(e.contains("unknown event 'cycles'"), "{e}");
    }

    #[test]
    fn latency_falls_back_unless_strict() {
        let (c, notes) = choose(&["mem:latency".into()], false).unwrap();
        assert_eq!(c.name, "mem:soft");
        assert!(notes[0].contains("mem:latency") && notes[0].contains("mem:soft"));
        assert!(choose(&["mem:latency".into()], true).is_err());
    }
}
