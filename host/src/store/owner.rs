//! Which process is making a run, and whether it still lives: a run whose
//! process was killed shows as interrupted at once, not only once its
//! deadline has passed. An owner is `host/pid-namespace/pid`; only a process
//! on this host, in this pid namespace, can be checked (on Linux, through
//! /proc) — any other is taken to be alive until the run's deadline.

use std::sync::LazyLock;

static THIS: LazyLock<String> = LazyLock::new(|| format!("{}/{}", *PLACE, std::process::id()));

/// `host/pid-namespace` of this process, as far as the system tells.
static PLACE: LazyLock<String> = LazyLock::new(|| {
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .map(|s| s.trim().to_owned())
            .unwrap_or_default()
    };
    let namespace = std::fs::read_link("/proc/self/ns/pid")
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    format!("{}/{namespace}", read("/proc/sys/kernel/hostname"))
});

/// This process, as recorded on the runs it makes.
pub fn this_process() -> &'static str {
    &THIS
}

/// Whether the process `owner` names is known to have ended.
pub fn is_gone(owner: &str) -> bool {
    if !cfg!(target_os = "linux") || PLACE.as_str() == "/" {
        return false;
    }
    let Some((place, pid)) = owner.rsplit_once('/') else {
        return false;
    };
    if place != PLACE.as_str() || pid.parse::<u32>().is_err() {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name, which is in parentheses.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state == "Z" || state == "X"),
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_lives_and_others_are_not_judged() {
        assert!(!is_gone(this_process()));
        assert!(!is_gone("another-host/pid:[1]/1"));
        assert!(!is_gone("garbage"));
        if cfg!(target_os = "linux") {
            // Pids never reach this on Linux (the maximum is 2^22).
            let dead = format!("{}/{}", *PLACE, 999_999_999);
            assert!(is_gone(&dead));
        }
    }
}
