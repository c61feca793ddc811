//! A client's limits, held before any model is called: its runs per minute
//! and its runs in progress at
//! once — per process, or across every instance on a PostgreSQL store
//! when it is given one (`share`; per process again while it cannot be
//! reached) — and its spend per UTC day and month
//! (in the store, so every instance sharing it holds the same sums: see
//! `store::spend`). A run is admitted by reserving its worst case (its cost
//! ceiling, `max_cost_usd`); when it ends, its cost replaces that.
//!
//! Every run of every entry point is counted here, once, when `app` admits
//! it ([`Gate::per_minute_for_run`]). `/mcp` asks earlier
//! ([`Gate::per_minute_early`]) only so that it can answer HTTP 429 with
//! `Retry-After` before MCP reads the request; what it counts there is left
//! as a credit that the run's admission then takes instead of counting
//! again.

pub mod period;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::client::{Client, Refusal, Refused};
use crate::llm::limits::{Kind, Shared};
use crate::record::show_usd;
use crate::store::{Ask, Store, Verdict, now_ms};

/// What is counted per client in this process.
#[derive(Default)]
pub struct Gate {
    clients: Mutex<HashMap<String, Local>>,
    /// Where instances count these limits together, if anywhere.
    shared: std::sync::OnceLock<Arc<dyn Shared>>,
}

/// The scope of a client's limits among the shared ones.
fn scope(client: &Client) -> String {
    format!("client:{}", client.name)
}

/// The shared limits failed: these are counted here for now.
fn fell_back(client: &Client, why: &str) {
    tracing::warn!(client = %client.name, "the client limits shared with other instances cannot be reached ({why}): this instance counts its own runs");
}

#[derive(Default)]
struct Local {
    running: u32,
    /// When each run of the last minute was asked for, oldest first.
    recent: VecDeque<Instant>,
    /// Runs counted early by a door (`per_minute_early`) whose admission
    /// has not taken them yet, oldest first; a credit lapses with its
    /// minute (a request that never became a run).
    credits: VecDeque<Instant>,
    /// When each rating of the last minute was given, oldest first.
    ratings: VecDeque<Instant>,
}

/// The most ratings one client may give in a minute, in this process:
/// plenty for people and for a program rating each of its runs, never
/// enough for one token to hold the store's writes from other tenants'
/// runs.
pub const MAX_RATINGS_PER_MINUTE: usize = 600;

/// Why a run was refused by its client's `max_runs_per_minute`.
#[derive(Debug, Clone, PartialEq)]
pub struct OverPerMinute {
    pub client: String,
    pub limit: u32,
    /// When one more run fits.
    pub retry_after: Duration,
}

impl OverPerMinute {
    /// Whole seconds to wait, rounded up (HTTP's `Retry-After`).
    pub fn retry_after_s(&self) -> u64 {
        self.retry_after.as_secs() + u64::from(self.retry_after.subsec_nanos() > 0)
    }
}

impl std::fmt::Display for OverPerMinute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "client `{}` may start {} runs per minute (max_runs_per_minute): try again in {} s",
            self.client,
            self.limit,
            self.retry_after_s()
        )
    }
}

const MINUTE: Duration = Duration::from_secs(60);

fn concurrent_refusal(client: &str, running: u32, limit: u32) -> Refusal {
    Refusal::new(
        Refused::Concurrent,
        format!(
            "client `{client}` already has {running} runs in progress, its limit (max_concurrent_runs = {limit}); \
             try again when one has finished"
        ),
    )
}

/// Forgets the instants of `times` (oldest first) a minute or more before
/// `now`.
fn within_the_minute(times: &mut VecDeque<Instant>, now: Instant) {
    while times
        .front()
        .is_some_and(|t| now.duration_since(*t) >= MINUTE)
    {
        times.pop_front();
    }
}

/// A run admitted: its slot among the client's runs in progress, and its
/// reservation against the budgets. Settle it with the run's cost; dropped
/// unsettled (a cancelled run), its worst case stays spent.
pub struct Pass {
    gate: Arc<Gate>,
    client: String,
    counted: bool,
    reservation: Option<(Store, String)>,
    /// Its run slot among the shared ones: where to give it back.
    shared_slot: Option<(Arc<dyn Shared>, String)>,
}

impl Gate {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Counts the clients' runs per minute and runs in progress in
    /// `shared` too, from now on (once).
    pub fn share(&self, shared: Arc<dyn Shared>) {
        let _ = self.shared.set(shared);
    }

    /// Whether admitting a run of `client` may ask the shared limits
    /// (a blocking call: see `admit`).
    pub fn asks_shared(&self, client: &Client) -> bool {
        self.shared.get().is_some() && client.limits.concurrent_runs.is_some()
    }

    /// Counts a run of `client` at a door that wants to refuse it before
    /// it becomes a run (`/mcp`'s HTTP 429); the run's admission takes the
    /// credit this leaves instead of counting again.
    pub async fn per_minute_early(&self, client: &Client) -> Result<(), OverPerMinute> {
        self.per_minute_shared(client).await?;
        if client.limits.runs_per_minute.is_some() {
            let mut clients = self.lock();
            let local = clients.entry(client.name.clone()).or_default();
            local.credits.push_back(Instant::now());
        }
        Ok(())
    }

    /// Counts a rating by `client`, or says how long until one more fits
    /// (`MAX_RATINGS_PER_MINUTE`).
    pub fn rating(&self, client: &Client) -> Result<(), Duration> {
        let now = Instant::now();
        let mut clients = self.lock();
        let ratings = &mut clients.entry(client.name.clone()).or_default().ratings;
        within_the_minute(ratings, now);
        if ratings.len() >= MAX_RATINGS_PER_MINUTE {
            let oldest = ratings.front().copied().unwrap_or(now);
            return Err(MINUTE.saturating_sub(now.duration_since(oldest)));
        }
        ratings.push_back(now);
        Ok(())
    }

    /// Counts a run of `client` as it is admitted: a credit left by
    /// `per_minute_early` if one is fresh, else one more of its limit.
    pub async fn per_minute_for_run(&self, client: &Client) -> Result<(), OverPerMinute> {
        if client.limits.runs_per_minute.is_none() {
            return Ok(());
        }
        {
            let now = Instant::now();
            let mut clients = self.lock();
            let local = clients.entry(client.name.clone()).or_default();
            within_the_minute(&mut local.credits, now);
            if local.credits.pop_front().is_some() {
                return Ok(());
            }
        }
        self.per_minute_shared(client).await
    }

    /// `per_minute`, counted across instances when shared (the local
    /// count when the shared one cannot be read).
    async fn per_minute_shared(&self, client: &Client) -> Result<(), OverPerMinute> {
        let (Some(shared), Some(limit)) = (self.shared.get(), client.limits.runs_per_minute) else {
            return self.per_minute(client);
        };
        let over = |retry_after| OverPerMinute {
            client: client.name.clone(),
            limit,
            retry_after,
        };
        match shared
            .take(&scope(client), Kind::Requests, 1, 0, u64::from(limit))
            .await
        {
            Ok(taken) if taken.granted >= 1 => Ok(()),
            Ok(taken) => Err(over(taken.retry_in.max(Duration::from_secs(1)))),
            Err(e) => {
                fell_back(client, &e);
                self.per_minute(client)
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Local>> {
        self.clients.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts one run asked for by `client` against its runs per minute;
    /// past the limit, how long until one more fits.
    fn per_minute(&self, client: &Client) -> Result<(), OverPerMinute> {
        let Some(limit) = client.limits.runs_per_minute else {
            return Ok(());
        };
        let now = Instant::now();
        let mut clients = self.lock();
        let local = clients.entry(client.name.clone()).or_default();
        within_the_minute(&mut local.recent, now);
        if local.recent.len() >= limit as usize {
            let oldest = local.recent.front().copied().unwrap_or(now);
            return Err(OverPerMinute {
                client: client.name.clone(),
                limit,
                retry_after: MINUTE.saturating_sub(now.duration_since(oldest)),
            });
        }
        local.recent.push_back(now);
        Ok(())
    }

    /// Whether a run of `client` would be refused now for its runs per
    /// minute, by this process's count, without counting one: for a door
    /// that refuses before it reads a request it may never make a run of.
    /// (Counted across instances, the limit is decided at admission.)
    pub fn per_minute_full(&self, client: &Client) -> Option<OverPerMinute> {
        let limit = client.limits.runs_per_minute?;
        let now = Instant::now();
        let mut clients = self.lock();
        let local = clients.get_mut(&client.name)?;
        within_the_minute(&mut local.recent, now);
        let oldest = *local.recent.front()?;
        (local.recent.len() >= limit as usize).then(|| OverPerMinute {
            client: client.name.clone(),
            limit,
            retry_after: MINUTE.saturating_sub(now.duration_since(oldest)),
        })
    }

    /// Why a run of `client` would be refused for its runs in progress
    /// now (this process's count; the shared one is asked at admission),
    /// without taking a slot.
    pub fn running_full(&self, client: &Client) -> Option<Refusal> {
        let limit = client.limits.concurrent_runs?;
        let running = self.lock().get(&client.name).map_or(0, |l| l.running);
        (running >= limit).then(|| concurrent_refusal(&client.name, running, limit))
    }

    /// Admits a run of `client` whose worst case is `worst_usd` (`None`:
    /// unbounded), or says why not, naming the limit. Blocking on the
    /// store: call it off the async runtime's threads.
    pub fn admit(
        self: &Arc<Self>,
        client: &Client,
        store: &Store,
        worst_usd: Option<f64>,
    ) -> Result<Pass, Refusal> {
        let mut pass = Pass {
            gate: self.clone(),
            client: client.name.clone(),
            counted: false,
            reservation: None,
            shared_slot: None,
        };
        if let Some(limit) = client.limits.concurrent_runs {
            let mut clients = self.lock();
            let local = clients.entry(client.name.clone()).or_default();
            if local.running >= limit {
                return Err(concurrent_refusal(&client.name, local.running, limit));
            }
            local.running += 1;
            pass.counted = true;
            drop(clients);
            if let Some(shared) = self.shared.get() {
                let scope = scope(client);
                match futures::executor::block_on(shared.take(
                    &scope,
                    Kind::Concurrency,
                    1,
                    0,
                    u64::from(limit),
                )) {
                    Ok(taken) if taken.granted >= 1 => {
                        pass.shared_slot = Some((shared.clone(), taken.hold));
                    }
                    Ok(_) => {
                        return Err(Refusal::new(
                            Refused::Concurrent,
                            format!(
                                "client `{}` already has {limit} runs in progress on the instances sharing this store, its limit (max_concurrent_runs = {limit}); \
                             try again when one has finished",
                                client.name
                            ),
                        ));
                    }
                    Err(e) => fell_back(client, &e),
                }
            }
        }
        if !client.limits.has_budget() {
            return Ok(pass);
        }
        let Some(worst) = worst_usd else {
            return Err(Refusal::new(
                Refused::Budget,
                format!(
                    "client `{}` has a budget, and this run's cost has no ceiling: set limits.max_cost_usd",
                    client.name
                ),
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
                Err(Refusal::new(
                    Refused::Budget,
                    format!(
                        "client `{}` has spent {} of its {} budget of {} ({}), and this run could cost up to {} \
                     (its max_cost_usd): refused before asking any model. The budget resets at {} (UTC).",
                        client.name,
                        show_usd(spent),
                        over.name,
                        show_usd(over.period.limit_usd),
                        over.key,
                        show_usd(worst),
                        over.resets,
                    ),
                ))
            }
            Err(e) => Err(Refusal::new(
                Refused::Unavailable,
                format!(
                    "client `{}` has a budget, and its spend cannot be read now ({e}); no run is started until it can",
                    client.name
                ),
            )),
        }
    }
}

impl Pass {
    /// Whether settling writes to the store (a client with a budget): only
    /// then is `settle` worth a blocking thread.
    pub fn settles_in_store(&self) -> bool {
        self.reservation.is_some()
    }

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
        if let Some((shared, hold)) = self.shared_slot.take() {
            // Runs on the store's own runtime, whether awaited or not.
            drop(shared.adjust(&hold, -1));
        }
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
