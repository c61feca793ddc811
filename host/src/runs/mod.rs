//! The record of recent runs, bounded in count and age, so a long-lived
//! server never grows without limit. Readable as MCP resources.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::record::RunRecord;

pub struct Runs {
    max: usize,
    ttl: Duration,
    kept: Mutex<VecDeque<(Instant, Arc<RunRecord>)>>,
}

impl Runs {
    pub fn new(max: usize, ttl: Duration) -> Self {
        Self {
            max,
            ttl,
            kept: Mutex::new(VecDeque::new()),
        }
    }

    pub fn insert(&self, run: Arc<RunRecord>) {
        let mut kept = self.lock();
        kept.push_back((Instant::now(), run));
        while kept.len() > self.max {
            kept.pop_front();
        }
        self.expire(&mut kept);
    }

    pub fn get(&self, run_id: &str) -> Option<Arc<RunRecord>> {
        let mut kept = self.lock();
        self.expire(&mut kept);
        kept.iter()
            .find(|(_, r)| r.run_id == run_id)
            .map(|(_, r)| r.clone())
    }

    /// The kept runs, newest first.
    pub fn list(&self) -> Vec<Arc<RunRecord>> {
        let mut kept = self.lock();
        self.expire(&mut kept);
        kept.iter().rev().map(|(_, r)| r.clone()).collect()
    }

    fn expire(&self, kept: &mut VecDeque<(Instant, Arc<RunRecord>)>) {
        while kept.front().is_some_and(|(at, _)| at.elapsed() > self.ttl) {
            kept.pop_front();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<(Instant, Arc<RunRecord>)>> {
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }
}
