//! A client's limits, held before any model is called: its runs per minute
//! (counted per process, answered with HTTP 429 by `mcp::http`), its runs
//! in progress at once (per process), and its spend per UTC day and month
//! (in the store, so every instance sharing it holds the same sums: see
//! `store::spend`). A run is admitted by reserving its worst case (its cost
//! ceiling, `max_cost_usd`); when it ends, its cost replaces that.

mod period;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::client::Client;
use crate::record::show_usd;
use crate::store::{Ask, Store, Verdict, now_ms};

/// What is counted per client in this process.
#[derive(Default)]
pub struct Gate {
    clients: Mutex<HashMap<String, Local>>,
}

#[derive(Default)]
struct Local {
    running: u32,
    /// When each run of the last minute was asked for, oldest first.
    recent: VecDeque<Instant>,
}

const MINUTE: Duration = Duration::from_secs(60);

/// A run admitted: its slot among the client's runs in progress, and its
/// reservation against the budgets. Settle it with the run's cost; dropped
/// unsettled (a cancelled run), its worst case stays spent.
pub struct Pass {
    gate: Arc<Gate>,
    client: String,
    counted: bool,
    reservation: Option<(Store, String)>,
}

impl Gate {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Local>> {
        self.clients.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts one run asked for by `client` against its runs per minute;
    /// past the limit, how long until one more fits.
    pub fn per_minute(&self, client: &Client) -> Result<(), Duration> {
        let Some(limit) = client.limits.runs_per_minute else {
            return Ok(());
        };
        let now = Instant::now();
        let mut clients = self.lock();
        let local = clients.entry(client.name.clone()).or_default();
        while local
            .recent
            .front()
            .is_some_and(|t| now.duration_since(*t) >= MINUTE)
        {
            local.recent.pop_front();
        }
        if local.recent.len() >= limit as usize {
            let oldest = local.recent.front().copied().unwrap_or(now);
            return Err(MINUTE.saturating_sub(now.duration_since(oldest)));
        }
        local.recent.push_back(now);
        Ok(())
    }

    /// Admits a run of `client` whose worst case is `worst_usd` (`None`:
    /// unbounded), or says why not, naming the limit. Blocking on the
    /// store: call it off the async runtime's threads.
    pub fn admit(
        self: &Arc<Self>,
        client: &Client,
        store: &Store,
        worst_usd: Option<f64>,
    ) -> Result<Pass, String> {
        let mut pass = Pass {
            gate: self.clone(),
            client: client.name.clone(),
            counted: false,
            reservation: None,
        };
        if let Some(limit) = client.limits.concurrent_runs {
            let mut clients = self.lock();
            let local = clients.entry(client.name.clone()).or_default();
            if local.running >= limit {
                return Err(format!(
                    "client `{}` already has {} runs in progress, its limit (max_concurrent_runs = {limit}); \
                     try again when one has finished",
                    client.name, local.running
                ));
            }
            local.running += 1;
            pass.counted = true;
        }
        if !client.limits.has_budget() {
            return Ok(pass);
        }
        let Some(worst) = worst_usd else {
            return Err(format!(
                "client `{}` has a budget, and this run's cost has no ceiling: set limits.max_cost_usd",
                client.name
            ));
        };
        let now = now_ms();
        let periods = period::of(&client.limits, now);
        let ask = Ask {
            id: uuid::Uuid::now_v7().to_string(),
            client: client.name.clone(),
            at: now,
            worst_usd: worst,
            periods: periods.iter().map(|p| p.period).collect(),
        };
        match store.reserve(&ask) {
            Ok(Verdict::Admitted { .. }) => {
                pass.reservation = Some((store.clone(), ask.id));
                Ok(pass)
            }
            Ok(Verdict::Over { period, spent }) => {
                let over = &periods[period];
                Err(format!(
                    "client `{}` has spent {} of its {} budget of {} ({}), and this run could cost up to {} \
                     (its max_cost_usd): refused before asking any model. The budget resets at {} (UTC).",
                    client.name,
                    show_usd(spent),
                    over.name,
                    show_usd(over.period.limit_usd),
                    over.key,
                    show_usd(worst),
                    over.resets,
                ))
            }
            Err(e) => Err(format!(
                "client `{}` has a budget, and its spend cannot be read now ({e}); no run is started until it can",
                client.name
            )),
        }
    }
}

impl Pass {
    /// The run ended having cost `cost_usd` (`None`: unknown, so its worst
    /// case stays spent). Blocking on the store.
    pub fn settle(mut self, cost_usd: Option<f64>) {
        if let (Some((store, id)), Some(cost)) = (self.reservation.take(), cost_usd)
            && let Err(e) = store.settle(&id, cost)
        {
            tracing::warn!(client = %self.client, "a run's cost was not recorded against its budget: {e}");
        }
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        if self.counted {
            let mut clients = self.gate.lock();
            if let Some(local) = clients.get_mut(&self.client) {
                local.running = local.running.saturating_sub(1);
            }
        }
    }
}

#[cfg(test)]
mod tests;
