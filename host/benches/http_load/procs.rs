//! What the bench reads of the processes it measures, from Linux's /proc:
//! resident memory, CPU time of one process, and CPU time of a process
//! tree (PostgreSQL: the postmaster and its backends, those that ended
//! included). Elsewhere it compiles but reads nothing.

/// VmRSS and VmHWM of `pid`, in KiB.
pub fn memory(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// The fields of `/proc/{pid}/stat` after the command name (which is in
/// parentheses): state is 0, ppid 1, utime 11, stime 12, cutime 13,
/// cstime 14.
fn stat(pid: u32) -> Vec<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    rest.split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect()
}

/// CPU time `pid` has used (user + system), in clock ticks.
pub fn cpu_ticks(pid: u32) -> u64 {
    let fields = stat(pid);
    fields.get(11).unwrap_or(&0) + fields.get(12).unwrap_or(&0)
}

/// CPU time of `root` and its children, in clock ticks: theirs while they
/// live, and what ended children used (counted in `root`'s cutime and
/// cstime once it has waited for them, as the postmaster does).
pub fn tree_ticks(root: u32) -> u64 {
    let own = stat(root);
    let mut ticks = own.iter().skip(11).take(4).sum::<u64>();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let fields = stat(pid);
        if fields.get(1) == Some(&u64::from(root)) {
            ticks += fields.get(11).unwrap_or(&0) + fields.get(12).unwrap_or(&0);
        }
    }
    ticks
}

#[cfg(unix)]
pub fn ticks_per_second() -> f64 {
    // SAFETY: sysconf only reads a system constant.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as f64 } else { 100.0 }
}

/// The bench measures through Linux's /proc; elsewhere it compiles (so the
/// workspace checks for every platform) but reads no CPU time.
#[cfg(not(unix))]
pub fn ticks_per_second() -> f64 {
    100.0
}
