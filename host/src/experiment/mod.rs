//! Experiments: one pipeline name that callers ask for, served by several
//! variants (`[experiments.NAME]`, see `config::Experiment`). This module
//! owns what the numbers mean — the statistics ([`sequence`]: anytime-
//! valid intervals, the chance each variant is best) and where an
//! experiment stands ([`verdict`]: guardrails, a winner, each variant's
//! share of new runs; [`timeline`]: its runs over time) and what a shadow
//! judgement is ([`shadow`]: the judge's question, how its two answers
//! combine, where a candidate synthesizer stands). It does no I/O: the numbers come from the store
//! (`store::experiments`), and `app` chooses each run's variant with them.

pub mod sequence;
pub mod shadow;
pub mod timeline;
pub mod verdict;

pub use verdict::{Status, Variant, Verdict};
