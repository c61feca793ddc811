//! Plugin stages stop at the run's deadline. A selector, prompter or
//! synthesizer still computing when `run_timeout` passes is stopped there
//! (the guest yields to the runtime every few milliseconds of fuel, and
//! dropping its call drops it), so a run ends within its deadline plus the
//! host's own bookkeeping — never a fixed wrap-up of plugin work past it.
//! A synthesizer stopped this way still returns the panel's answers side
//! by side (`checks::side_by_side`).

use std::time::Duration;

use tokio::time::Instant;

use crate::plugins::PluginError;

/// `call` of `plugin`, stopped at `deadline` (the end of a run of
/// `run_timeout`).
pub(super) async fn by_deadline<T>(
    deadline: Instant,
    run_timeout: Duration,
    plugin: &str,
    call: impl Future<Output = Result<T, PluginError>>,
) -> Result<T, PluginError> {
    match tokio::time::timeout_at(deadline, call).await {
        Ok(result) => result,
        Err(_) => Err(PluginError::Deadline {
            plugin: plugin.to_owned(),
            limit: run_timeout,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_stage_still_working_at_the_deadline_is_stopped_there() {
        let started = Instant::now();
        let deadline = started + Duration::from_secs(3);
        let forever = std::future::pending::<Result<(), PluginError>>();
        let error = by_deadline(deadline, Duration::from_secs(3), "spin", forever)
            .await
            .unwrap_err();
        assert_eq!(Instant::now() - started, Duration::from_secs(3));
        assert_eq!(error.kind(), "deadline");
        assert!(error.to_string().contains("run_timeout (3s)"), "{error}");
    }
}
