//! The async runtime a command runs on, and how many worker threads it
//! has. A run costs chorus about a millisecond of CPU across seconds of
//! waiting for models, so one worker keeps up with far more runs than a
//! client makes. A second one, idle beside it, is not free: tokio wakes
//! an idle worker whenever a task wakes, to look for work to steal, and
//! at one run at a time those wake-ups were seven of a run's ten thread
//! switches and a fifth of its CPU. So a process that serves one client —
//! MCP over stdio, a terminal command — runs one worker; one that serves
//! many at once (`serve --http`, the viewer, `eval`'s parallel runs) runs
//! one per core. `CHORUS_WORKERS` sets the number either way. Blocking
//! work (the store's reads, file loads, plugin compiles) is on tokio's
//! blocking threads, and a plugin's code yields while it runs, so one
//! worker never waits on them.

use tokio::runtime::{Builder, Runtime};

/// Sets the number of worker threads.
pub const WORKERS_ENV: &str = "CHORUS_WORKERS";
/// The most `CHORUS_WORKERS` may ask for.
const MOST: usize = 256;

/// Who the process serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Serves {
    OneClient,
    Many,
}

/// The runtime for a process that serves `serves`.
pub fn build(serves: Serves) -> Result<Runtime, String> {
    let workers = workers(serves, std::env::var(WORKERS_ENV).ok().as_deref())?;
    Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))
}

/// How many workers: `setting` (the variable's value) if given, else one
/// for one client and one per core for many.
fn workers(serves: Serves, setting: Option<&str>) -> Result<usize, String> {
    if let Some(setting) = setting.map(str::trim).filter(|s| !s.is_empty()) {
        return match setting.parse::<usize>() {
            Ok(n) if (1..=MOST).contains(&n) => Ok(n),
            _ => Err(format!(
                "{WORKERS_ENV} must be a whole number of worker threads from 1 to {MOST}, not `{setting}`; unset it to let chorus choose"
            )),
        };
    }
    Ok(match serves {
        Serves::OneClient => 1,
        Serves::Many => std::thread::available_parallelism().map_or(1, |n| n.get()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_client_gets_one_worker_many_get_one_a_core_unless_told() {
        let cores = std::thread::available_parallelism().unwrap().get();
        assert_eq!(workers(Serves::OneClient, None), Ok(1));
        assert_eq!(workers(Serves::Many, None), Ok(cores));
        assert_eq!(workers(Serves::Many, Some(" ")), Ok(cores));
        assert_eq!(workers(Serves::OneClient, Some("4")), Ok(4));
        assert_eq!(workers(Serves::Many, Some(" 1 ")), Ok(1));
        for bad in ["0", "-1", "two", "257", "1.5"] {
            let error = workers(Serves::OneClient, Some(bad)).unwrap_err();
            assert!(
                error.contains(WORKERS_ENV) && error.contains(&format!("`{bad}`")),
                "{error}"
            );
        }
    }
}
