//! PMU discovery in sysfs, and the `perf_event_attr` fields of the hardware
//! memory events built from it.
//!
//! Every PMU the kernel registers appears as a directory under
//! `/sys/bus/event_source/devices/<pmu>/` with:
//!
//! * `type`: the number for `perf_event_attr.type`;
//! * `format/<term>`: where a term's value goes, e.g. `config:0-7`,
//!   `config1:0-15`, `config:32`, or several ranges `config:0-7,32-35`
//!   (the value's bits fill the listed bit positions from the lowest up);
//! * `events/<name>`: an event as terms, e.g. `event=0xcd,umask=0x1,ldlat=3`
//!   (a term without a value means 1; files with a `.` such as `.scale`
//!   are metadata);
//! * `caps/<name>`: capabilities.
//!
//! The memory events are built from these files only, never from tables of
//! CPU models: Intel PEBS `mem-loads` (with the load-latency threshold put
//! into its `ldlat` term) and `mem-stores` of the `cpu` PMU, or `cpu_core` on
//! hybrid parts (then `mem-loads-aux`, if listed, must lead the group);
//! AMD `ibs_op`; Arm `arm_spe_*` with its `load_filter`/`store_filter`,
//! `min_latency`, `ts_enable` and `jitter` terms.
//!
//! This file uses only `std`: the launcher (`hpcrun-rs`) compiles it too,
//! for `--list-events` and to pass the chosen attributes to the library in
//! `HPCRUN_HW_ATTR`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// Where the kernel lists PMUs.
pub const DEVICES: &str = "/sys/bus/event_source/devices";

/// Default load-latency threshold (cycles) of `mem:latency`, as `perf mem`.
pub const DEFAULT_LDLAT: u32 = 30;

/// A sysfs file that could not be read or understood.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysfsError {
    pub path: PathBuf,
    pub what: String,
}

impl fmt::Display for SysfsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.what)
    }
}

impl std::error::Error for SysfsError {}

fn err(path: &Path, what: impl Into<String>) -> SysfsError {
    SysfsError {
        path: path.to_path_buf(),
        what: what.into(),
    }
}

/// Which `perf_event_attr` word a format term lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ConfigWord {
    Config,
    Config1,
    Config2,
    Config3,
    Config4,
}

/// `format/<term>`: the bit positions of a term's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Format {
    pub word: ConfigWord,
    /// The bit positions, as a mask.
    pub mask: u64,
}

impl Format {
    /// Parses `config:0-7`, `config1:0-15`, `config:32`, `config:0-7,32-35`.
    pub fn parse(text: &str) -> Result<Format, String> {
        let text = text.trim();
        let (word, ranges) = text
            .split_once(':')
            .ok_or_else(|| format!("'{text}' is not <config word>:<bits>"))?;
        let word = match word {
            "config" => ConfigWord::Config,
            "config1" => ConfigWord::Config1,
            "config2" => ConfigWord::Config2,
            "config3" => ConfigWord::Config3,
            "config4" => ConfigWord::Config4,
            other => return Err(format!("unknown config word '{other}'")),
        };
        let bit = |s: &str| -> Result<u32, String> {
            s.trim()
                .parse::<u32>()
                .ok()
                .filter(|&b| b < 64)
                .ok_or_else(|| format!("bad bit number '{s}' in '{text}'"))
        };
        let mut mask = 0u64;
        for range in ranges.split(',') {
            let (lo, hi) = match range.split_once('-') {
                Some((lo, hi)) => (bit(lo)?, bit(hi)?),
                None => (bit(range)?, bit(range)?),
            };
            if lo > hi {
                return Err(format!("reversed bit range '{range}' in '{text}'"));
            }
            let width = hi - lo + 1;
            let ones = if width == 64 {
                u64::MAX
            } else {
                (1u64 << width) - 1
            };
            mask |= ones << lo;
        }
        Ok(Format { word, mask })
    }

    /// Number of value bits the term holds.
    pub fn width(&self) -> u32 {
        self.mask.count_ones()
    }

    /// Scatters `value`'s low bits into the mask's positions, lowest first
    /// (perf's `pmu_format_value`). `None` if the value does not fit.
    pub fn place(&self, value: u64) -> Option<u64> {
        if self.width() < 64 && value >> self.width() != 0 {
            return None;
        }
        let mut out = 0;
        let mut next = 0;
        for pos in 0..64 {
            if self.mask >> pos & 1 != 0 {
                out |= (value >> next & 1) << pos;
                next += 1;
            }
        }
        Some(out)
    }
}

/// Parses an event's terms: `event=0xcd,umask=0x1,ldlat=3` (hex with `0x`
/// or decimal; a bare term means 1).
pub fn parse_terms(text: &str) -> Result<Vec<(String, u64)>, String> {
    let mut terms = Vec::new();
    for term in text.trim().split(',') {
        let term = term.trim();
        if term.is_empty() {
            return Err(format!("empty term in '{}'", text.trim()));
        }
        let (name, value) = match term.split_once('=') {
            Some((n, v)) => {
                let v = v.trim();
                let parsed = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
                    Some(hex) => u64::from_str_radix(hex, 16).ok(),
                    None => v.parse().ok(),
                };
                (
                    n.trim(),
                    parsed.ok_or_else(|| format!("bad value '{v}' of term '{n}'"))?,
                )
            }
            None => (term, 1),
        };
        let valid = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid {
            return Err(format!("bad term name '{name}'"));
        }
        terms.push((name.to_string(), value));
    }
    Ok(terms)
}

/// The config words of an attr.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    pub config: u64,
    pub config1: u64,
    pub config2: u64,
    pub config3: u64,
    pub config4: u64,
}

impl Config {
    fn word(&mut self, w: ConfigWord) -> &mut u64 {
        match w {
            ConfigWord::Config => &mut self.config,
            ConfigWord::Config1 => &mut self.config1,
            ConfigWord::Config2 => &mut self.config2,
            ConfigWord::Config3 => &mut self.config3,
            ConfigWord::Config4 => &mut self.config4,
        }
    }
}

/// One PMU as sysfs describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pmu {
    pub name: String,
    pub dir: PathBuf,
    pub type_: u32,
    pub formats: BTreeMap<String, Format>,
    /// Event name -> its terms text (as in the file, trimmed).
    pub events: BTreeMap<String, String>,
    pub caps: BTreeMap<String, String>,
}

fn read_text(path: &Path) -> Result<String, SysfsError> {
    std::fs::read_to_string(path).map_err(|e| err(path, e.to_string()))
}

/// The (sorted) entries of a directory that may be missing.
fn entries(dir: &Path) -> Result<Vec<(String, PathBuf)>, SysfsError> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(err(dir, e.to_string())),
    };
    let mut out = Vec::new();
    for e in rd {
        let e = e.map_err(|e| err(dir, e.to_string()))?;
        let name = e.file_name().to_string_lossy().into_owned();
        out.push((name, e.path()));
    }
    out.sort();
    Ok(out)
}

impl Pmu {
    /// Reads `devices/<name>`.
    pub fn read(devices: &Path, name: &str) -> Result<Pmu, SysfsError> {
        let dir = devices.join(name);
        let type_path = dir.join("type");
        let type_text = read_text(&type_path)?;
        let type_ = type_text.trim().parse().map_err(|_| {
            err(
                &type_path,
                format!("'{}' is not a PMU type number", type_text.trim()),
            )
        })?;
        let mut formats = BTreeMap::new();
        for (term, path) in entries(&dir.join("format"))? {
            let f = Format::parse(&read_text(&path)?).map_err(|w| err(&path, w))?;
            formats.insert(term, f);
        }
        let mut events = BTreeMap::new();
        for (event, path) in entries(&dir.join("events"))? {
            if !event.contains('.') {
                events.insert(event, read_text(&path)?.trim().to_string());
            }
        }
        let mut caps = BTreeMap::new();
        for (cap, path) in entries(&dir.join("caps"))? {
            if path.is_file() {
                caps.insert(cap, read_text(&path)?.trim().to_string());
            }
        }
        Ok(Pmu {
            name: name.to_string(),
            dir,
            type_,
            formats,
            events,
            caps,
        })
    }

    /// Encodes terms into config words. `config`, `config1`, ... are
    /// accepted as terms too; `period` is ignored (the period is chosen by
    /// the user).
    pub fn encode(&self, terms: &[(String, u64)]) -> Result<Config, SysfsError> {
        let mut c = Config::default();
        for (name, value) in terms {
            let direct = match name.as_str() {
                "config" => Some(ConfigWord::Config),
                "config1" => Some(ConfigWord::Config1),
                "config2" => Some(ConfigWord::Config2),
                "config3" => Some(ConfigWord::Config3),
                "config4" => Some(ConfigWord::Config4),
                _ => None,
            };
            if let (Some(w), None) = (direct, self.formats.get(name)) {
                *c.word(w) |= value;
                continue;
            }
            if name == "period" {
                continue;
            }
            let format = self.formats.get(name).ok_or_else(|| {
                err(
                    &self.dir.join("format"),
                    format!("PMU {} has no format term '{name}'", self.name),
                )
            })?;
            let bits = format.place(*value).ok_or_else(|| {
                err(
                    &self.dir.join("format").join(name),
                    format!(
                        "value {value:#x} of term '{name}' does not fit in {} bits",
                        format.width()
                    ),
                )
            })?;
            let word = c.word(format.word);
            *word = (*word & !format.mask) | bits;
        }
        Ok(c)
    }

    /// The terms of `events/<event>`.
    pub fn event_terms(&self, event: &str) -> Result<Vec<(String, u64)>, SysfsError> {
        let path = self.dir.join("events").join(event);
        let text = self
            .events
            .get(event)
            .ok_or_else(|| err(&path, format!("PMU {} has no event {event}", self.name)))?;
        parse_terms(text).map_err(|w| err(&path, w))
    }

    pub fn has_event(&self, event: &str) -> bool {
        self.events.contains_key(event)
    }
}

/// The PMU names under `devices` (sorted; empty if the directory is missing).
pub fn devices(devices: &Path) -> Result<Vec<String>, SysfsError> {
    Ok(entries(devices)?.into_iter().map(|(n, _)| n).collect())
}

/// The two hardware memory events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MemEvent {
    /// Loads with their latency (`mem:latency`).
    Latency,
    /// Stores (`mem:stores`).
    Stores,
}

impl MemEvent {
    pub fn name(self) -> &'static str {
        match self {
            MemEvent::Latency => "mem:latency",
            MemEvent::Stores => "mem:stores",
        }
    }

    pub fn from_name(name: &str) -> Option<MemEvent> {
        match name {
            "mem:latency" => Some(MemEvent::Latency),
            "mem:stores" => Some(MemEvent::Stores),
            _ => None,
        }
    }
}

/// Which hardware mechanism delivers the samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Vendor {
    /// Intel PEBS: generic sample fields (ADDR, WEIGHT, DATA_SRC).
    IntelPebs,
    /// AMD IBS op sampling: the register block in PERF_SAMPLE_RAW.
    AmdIbs,
    /// Arm SPE: packets in the AUX area.
    ArmSpe,
}

impl Vendor {
    pub fn name(self) -> &'static str {
        match self {
            Vendor::IntelPebs => "intel-pebs",
            Vendor::AmdIbs => "amd-ibs",
            Vendor::ArmSpe => "arm-spe",
        }
    }

    fn from_name(name: &str) -> Option<Vendor> {
        [Vendor::IntelPebs, Vendor::AmdIbs, Vendor::ArmSpe]
            .into_iter()
            .find(|v| v.name() == name)
    }
}

/// The attribute fields of a hardware memory event (the rest of
/// `perf_event_attr`, e.g. `sample_type`, follows from `vendor`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HwAttr {
    pub event: MemEvent,
    pub vendor: Vendor,
    pub pmu: String,
    pub type_: u32,
    pub config: u64,
    pub config1: u64,
    pub config2: u64,
    pub config3: u64,
    /// Intel parts that list `mem-loads-aux`: the config of that event, which
    /// must be the group leader of `mem-loads` (same PMU type; counting only).
    pub aux_leader: Option<u64>,
    /// Samples of kernel code are excluded by the hardware or the driver
    /// (`exclude_kernel`); false for IBS without the `swfilt` term, whose
    /// driver refuses it.
    pub exclude_kernel: bool,
    /// Filled in by probing (`perf_event_open` accepted this level).
    pub precise_ip: u8,
}

impl HwAttr {
    /// The `precise_ip` levels to try, best first. PEBS needs at least 1
    /// (without it the event is not sampled by PEBS and carries no data
    /// address); IBS and SPE are precise by construction.
    pub fn precise_candidates(&self) -> &'static [u8] {
        match self.vendor {
            Vendor::IntelPebs => &[3, 2, 1],
            Vendor::AmdIbs | Vendor::ArmSpe => &[0],
        }
    }

    /// The sampling period used without `@N`: qualifying loads or stores
    /// for PEBS, ops for IBS (counting dispatched ops) and SPE.
    pub fn default_period(&self) -> u64 {
        match self.vendor {
            Vendor::IntelPebs => 10_007,
            Vendor::AmdIbs => 262_144,
            Vendor::ArmSpe => 65_536,
        }
    }

    /// `period` adjusted to what the hardware takes: IBS ignores the low 4
    /// bits of its max count (and needs at least 16).
    pub fn valid_period(&self, period: u64) -> u64 {
        match self.vendor {
            Vendor::AmdIbs => (period & !0xf).max(0x10),
            _ => period.max(1),
        }
    }

    /// The samples come through the AUX area (SPE), not the ring itself.
    pub fn uses_aux_area(&self) -> bool {
        self.vendor == Vendor::ArmSpe
    }

    /// The `HPCRUN_HW_ATTR` value passed from the launcher to the library.
    pub fn to_env(&self) -> String {
        format!(
            "event={},vendor={},pmu={},type={},config={:#x},config1={:#x},config2={:#x},config3={:#x},aux_leader={},exclude_kernel={},precise={}",
            self.event.name(),
            self.vendor.name(),
            self.pmu,
            self.type_,
            self.config,
            self.config1,
            self.config2,
            self.config3,
            self.aux_leader.map_or("none".to_string(), |c| format!("{c:#x}")),
            self.exclude_kernel as u8,
            self.precise_ip,
        )
    }

    /// Parses [`HwAttr::to_env`]'s output.
    pub fn from_env(text: &str) -> Result<HwAttr, String> {
        let mut fields: BTreeMap<&str, &str> = BTreeMap::new();
        for part in text.trim().split(',') {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("'{part}' is not key=value"))?;
            fields.insert(k, v);
        }
        let get = |k: &str| fields.get(k).copied().ok_or_else(|| format!("no '{k}'"));
        let num = |k: &str| -> Result<u64, String> {
            let v = get(k)?;
            match v.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16),
                None => v.parse(),
            }
            .map_err(|_| format!("bad number '{v}' for '{k}'"))
        };
        let event = get("event")?;
        let vendor = get("vendor")?;
        Ok(HwAttr {
            event: MemEvent::from_name(event).ok_or_else(|| format!("unknown event '{event}'"))?,
            vendor: Vendor::from_name(vendor)
                .ok_or_else(|| format!("unknown vendor '{vendor}'"))?,
            pmu: get("pmu")?.to_string(),
            type_: u32::try_from(num("type")?).map_err(|_| "type out of range".to_string())?,
            config: num("config")?,
            config1: num("config1")?,
            config2: num("config2")?,
            config3: num("config3")?,
            aux_leader: match get("aux_leader")? {
                "none" => None,
                _ => Some(num("aux_leader")?),
            },
            exclude_kernel: num("exclude_kernel")? != 0,
            precise_ip: u8::try_from(num("precise")?)
                .ok()
                .filter(|&p| p <= 3)
                .ok_or_else(|| "precise must be 0..3".to_string())?,
        })
    }
}

/// Why a memory event cannot be built from sysfs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unsupported {
    /// No memory-sampling PMU: the PMU names found.
    NoDevice { devices: Vec<String> },
    /// The PMU is there but does not list the event (e.g. no `mem-stores`).
    NoEvent { pmu: String, event: &'static str },
    /// A sysfs file was unreadable or malformed.
    Sysfs(SysfsError),
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unsupported::NoDevice { devices } => write!(
                f,
                "no memory-sampling PMU (Intel PEBS mem-loads, AMD ibs_op, Arm arm_spe) among: {}",
                if devices.is_empty() {
                    "(none)".to_string()
                } else {
                    devices.join(" ")
                }
            ),
            Unsupported::NoEvent { pmu, event } => {
                write!(f, "the {pmu} PMU does not list the {event} event")
            }
            Unsupported::Sysfs(e) => write!(f, "unreadable PMU description: {e}"),
        }
    }
}

impl From<SysfsError> for Unsupported {
    fn from(e: SysfsError) -> Self {
        Unsupported::Sysfs(e)
    }
}

/// The memory-sampling PMU of this machine, if any: (vendor, PMU name).
pub fn find_memory_pmu(devices_dir: &Path) -> Result<(Vendor, String), Unsupported> {
    let names = devices(devices_dir)?;
    let has_mem_loads = |pmu: &str| devices_dir.join(pmu).join("events/mem-loads").is_file();
    if let Some(p) = ["cpu", "cpu_core"]
        .into_iter()
        .find(|p| names.iter().any(|n| n == p) && has_mem_loads(p))
    {
        return Ok((Vendor::IntelPebs, p.to_string()));
    }
    if names.iter().any(|n| n == "ibs_op") {
        return Ok((Vendor::AmdIbs, "ibs_op".to_string()));
    }
    if let Some(spe) = names.iter().find(|n| n.starts_with("arm_spe")) {
        return Ok((Vendor::ArmSpe, spe.clone()));
    }
    Err(Unsupported::NoDevice { devices: names })
}

/// Builds the attr of `event` from the PMU descriptions under `devices_dir`
/// (normally [`DEVICES`]). `ldlat` is the load-latency threshold in cycles
/// (PEBS `ldlat`, SPE `min_latency`; IBS has none).
pub fn mem_event_attr(
    devices_dir: &Path,
    event: MemEvent,
    ldlat: u32,
) -> Result<HwAttr, Unsupported> {
    let (vendor, name) = find_memory_pmu(devices_dir)?;
    let pmu = Pmu::read(devices_dir, &name)?;
    let term = |name: &str, value: u64| (name.to_string(), value);
    let mut aux_leader = None;
    let mut exclude_kernel = true;
    let config = match vendor {
        Vendor::IntelPebs => {
            let sysfs_event = match event {
                MemEvent::Latency => "mem-loads",
                MemEvent::Stores => "mem-stores",
            };
            if !pmu.has_event(sysfs_event) {
                return Err(Unsupported::NoEvent {
                    pmu: name,
                    event: sysfs_event,
                });
            }
            let mut terms = pmu.event_terms(sysfs_event)?;
            if event == MemEvent::Latency {
                terms.retain(|(n, _)| n != "ldlat");
                terms.push(term("ldlat", ldlat as u64));
                if pmu.has_event("mem-loads-aux") {
                    aux_leader = Some(pmu.encode(&pmu.event_terms("mem-loads-aux")?)?.config);
                }
            }
            pmu.encode(&terms)?
        }
        Vendor::AmdIbs => {
            // One IBS op configuration for both events (IBS samples every
            // kind of op; loads or stores are picked from the samples).
            // cnt_ctl=1 counts dispatched ops instead of cycles, so samples
            // spread over instructions rather than over time.
            let mut terms = Vec::new();
            if pmu.formats.contains_key("cnt_ctl") {
                terms.push(term("cnt_ctl", 1));
            }
            // Without swfilt the driver refuses exclude_kernel.
            exclude_kernel = pmu.formats.contains_key("swfilt");
            if exclude_kernel {
                terms.push(term("swfilt", 1));
            }
            pmu.encode(&terms)?
        }
        Vendor::ArmSpe => {
            let mut terms = vec![];
            for (t, v) in [("ts_enable", 1), ("jitter", 1)] {
                if pmu.formats.contains_key(t) {
                    terms.push(term(t, v));
                }
            }
            match event {
                MemEvent::Latency => {
                    terms.push(term("load_filter", 1));
                    if let Some(f) = pmu.formats.get("min_latency") {
                        // Clamp to the field (12 bits on current parts).
                        let max = if f.width() >= 64 {
                            u64::MAX
                        } else {
                            (1u64 << f.width()) - 1
                        };
                        terms.push(term("min_latency", (ldlat as u64).min(max)));
                    }
                }
                MemEvent::Stores => terms.push(term("store_filter", 1)),
            }
            pmu.encode(&terms)?
        }
    };
    Ok(HwAttr {
        event,
        vendor,
        pmu: name,
        type_: pmu.type_,
        config: config.config,
        config1: config.config1,
        config2: config.config2,
        config3: config.config3,
        aux_leader,
        exclude_kernel,
        precise_ip: 0,
    })
}

#[cfg(test)]
mod tests;
