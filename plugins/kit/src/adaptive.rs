//! Adaptive compute: asking for more answers only while they can still
//! change the result. Owns the vote's stopping rule (when the leader can no
//! longer be caught by the samples still allowed), the size of the next
//! wave, what a run spent against the full panel it avoided, and reading the
//! confidence a model states about its own answer.
//!
//! The rules are pure functions over counts, so they are tested natively
//! (unit and property tests below); the plugins feed them the host's
//! completions and budget.

use crate::wit::types::{Completion, ModelInfo};
use serde_json::{Value, json};

/// Whether a vote is settled: with `remaining` more votes, however they
/// fall (all to the runner-up, or to an answer nobody gave yet), no rival
/// can reach the leader — not even to tie, so stopping here gives the same
/// winner the full panel would. `counts` are the votes per answer, any order.
pub fn settled(counts: &[u32], remaining: u32) -> bool {
    let (leader, runner_up) = top_two(counts);
    u64::from(leader) > u64::from(runner_up) + u64::from(remaining)
}

/// The fewest more votes that could settle the vote (if every one went to
/// the leader), at most `remaining`; 0 when it is settled already. Asking
/// fewer can never end the vote, so this is the size of the next wave.
pub fn votes_to_settle(counts: &[u32], remaining: u32) -> u32 {
    if settled(counts, remaining) {
        return 0;
    }
    let (leader, runner_up) = top_two(counts);
    // After k more votes, all to the leader: leader + k > runner_up + (remaining - k).
    let gap = u64::from(runner_up) + u64::from(remaining) - u64::from(leader);
    let needed = gap / 2 + 1;
    u32::try_from(needed).unwrap_or(u32::MAX).min(remaining)
}

/// The first wave of a vote whose panel allows `ceiling` samples: the
/// fewest that could settle it (more than half), so a unanimous first wave
/// ends the vote.
pub fn first_wave(ceiling: u32) -> u32 {
    votes_to_settle(&[], ceiling)
}

fn top_two(counts: &[u32]) -> (u32, u32) {
    let mut leader = 0;
    let mut runner_up = 0;
    for &count in counts {
        if count > leader {
            runner_up = leader;
            leader = count;
        } else if count > runner_up {
            runner_up = count;
        }
    }
    (leader, runner_up)
}

/// Whether `votes` of `cast` is a majority (more than half); otherwise the
/// winner has only a plurality.
pub fn is_majority(votes: usize, cast: usize) -> bool {
    votes * 2 > cast
}

/// What a run spent on model calls: calls made and the USD they reported.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Spend {
    /// Calls that were sent (refused ones are not calls).
    pub calls: u32,
    /// USD reported (or estimated by the host) for those calls.
    pub cost: f64,
    /// How many of the calls had a cost; the rest cost an unknown amount.
    pub priced: u32,
}

impl Spend {
    /// Counts one call that was sent, with its cost if known.
    pub fn add(&mut self, cost: Option<f64>) {
        self.calls += 1;
        if let Some(cost) = cost {
            self.cost += cost;
            self.priced += 1;
        }
    }

    /// Counts every completion that was sent (has a call id).
    pub fn add_completions<'a>(&mut self, completions: impl IntoIterator<Item = &'a Completion>) {
        for completion in completions {
            if completion.id.is_some() {
                self.add(cost_of(completion));
            }
        }
    }

    /// The mean cost of a priced call, if any call was priced.
    pub fn per_call(&self) -> Option<f64> {
        (self.priced > 0).then(|| self.cost / f64::from(self.priced))
    }

    /// The cost, if every call was priced; `None` rather than a figure
    /// that leaves calls out.
    pub fn known_cost(&self) -> Option<f64> {
        (self.calls > 0 && self.priced == self.calls).then_some(self.cost)
    }
}

/// A completion's cost, when its answer carried usage with a cost.
pub fn cost_of(completion: &Completion) -> Option<f64> {
    completion.outcome.as_ref().ok()?.usage.as_ref()?.cost
}

/// What the full panel would have cost, its calls named by model (a model
/// once per call). Each call is priced by the best evidence there is for
/// its model: the mean cost of the calls this run made of it; else its
/// catalog prices (`prices`, as `host.models` gives them) at the mean size
/// of this run's calls; else the mean cost of any call this run made.
/// `None` when nothing this run made reported a cost or tokens.
pub fn full_panel_cost(full: &[&str], made: &[Completion], prices: &[ModelInfo]) -> Option<f64> {
    let mut overall = Spend::default();
    overall.add_completions(made);
    let usages: Vec<_> = made
        .iter()
        .filter_map(|c| c.outcome.as_ref().ok()?.usage.as_ref())
        .collect();
    let mean_tokens = (!usages.is_empty()).then(|| {
        let n = usages.len() as f64;
        (
            usages
                .iter()
                .map(|u| f64::from(u.prompt_tokens))
                .sum::<f64>()
                / n,
            usages
                .iter()
                .map(|u| f64::from(u.completion_tokens))
                .sum::<f64>()
                / n,
        )
    });
    let mut total = 0.0;
    for model in full {
        let mut of_model = Spend::default();
        of_model.add_completions(made.iter().filter(|c| c.model == *model));
        let listed = || {
            let info = prices.iter().find(|m| m.id == *model)?;
            let (prompt, completion) = mean_tokens?;
            Some((prompt * info.input_price? + completion * info.output_price?) / 1_000_000.0)
        };
        total += of_model
            .per_call()
            .or_else(listed)
            .or_else(|| overall.per_call())?;
    }
    Some(total)
}

/// What a run spent against what the full panel would have: for the
/// result's details and its note.
#[derive(Debug, Clone, PartialEq)]
pub struct Account {
    pub spent: Spend,
    /// Calls the full panel makes.
    pub full_calls: u32,
    /// Its estimated cost (see `full_panel_cost`).
    pub full_cost: Option<f64>,
}

impl Account {
    pub fn new(spent: Spend, full_calls: u32, full_cost: Option<f64>) -> Self {
        Self {
            spent,
            full_calls,
            full_cost,
        }
    }

    /// Calls saved against the full panel (0 when it spent as many or more).
    pub fn calls_saved(&self) -> u32 {
        self.full_calls.saturating_sub(self.spent.calls)
    }

    pub fn details(&self) -> Value {
        json!({
            "calls": self.spent.calls,
            "cost_usd": self.spent.known_cost().map(round_usd),
            "full_panel_calls": self.full_calls,
            "full_panel_cost_usd": self.full_cost.map(round_usd),
            "full_panel_cost_estimated": true,
            "calls_saved": self.calls_saved(),
        })
    }

    /// "Spent 5 calls ($0.0025) against the full panel's 9 (about $0.0045):
    /// 4 calls saved."
    pub fn sentence(&self) -> String {
        let spent = match self.spent.known_cost() {
            Some(cost) => format!("{} calls ({})", self.spent.calls, usd(cost)),
            None if self.spent.priced > 0 => format!(
                "{} calls (at least {}; {} reported no cost)",
                self.spent.calls,
                usd(self.spent.cost),
                self.spent.calls - self.spent.priced
            ),
            None => format!("{} calls (cost not reported)", self.spent.calls),
        };
        let full = match self.full_cost {
            Some(cost) => format!("{} (about {}, estimated)", self.full_calls, usd(cost)),
            None => self.full_calls.to_string(),
        };
        let saved = match self.calls_saved() {
            0 => "no calls saved".to_owned(),
            1 => "1 call saved".to_owned(),
            n => format!("{n} calls saved"),
        };
        format!("Spent {spent} against the full panel's {full}: {saved}.")
    }
}

fn usd(cost: f64) -> String {
    if cost >= 0.01 {
        format!("${cost:.2}")
    } else {
        format!("${cost:.4}")
    }
}

fn round_usd(cost: f64) -> f64 {
    (cost * 1e8).round() / 1e8
}

/// The confidence a reply states on a line of its own ("Confidence: 85%",
/// "confidence = 0.85", "Confidence: 8/10"), as a fraction in [0, 1], and
/// the reply without that line. The last such line counts; `None` when
/// there is none or its number is out of range.
pub fn stated_confidence(reply: &str) -> Option<(f64, String)> {
    let lines: Vec<&str> = reply.lines().collect();
    let (at, value) = lines
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, line)| confidence_line(line).map(|v| (i, v)))?;
    let rest: Vec<&str> = lines
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != at)
        .map(|(_, l)| *l)
        .collect();
    Some((value, rest.join("\n").trim_end().to_owned()))
}

/// `Confidence: 85%` -> 0.85, on one line (markdown emphasis allowed).
fn confidence_line(line: &str) -> Option<f64> {
    let line = line.trim().trim_matches(|c: char| c == '*' || c == '_');
    let lower = line.to_lowercase();
    let rest = lower.strip_prefix("confidence")?;
    let rest = rest
        .trim_start_matches(|c: char| c == '*' || c == '_' || c.is_whitespace())
        .strip_prefix([':', '='])?
        .trim_start_matches(|c: char| c == '*' || c == '_' || c.is_whitespace());
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let number: f64 = rest[..end].parse().ok()?;
    let unit = rest[end..].trim_start();
    let value = if unit.starts_with('%') {
        number / 100.0
    } else if let Some(scale) = unit.strip_prefix('/') {
        let digits: String = scale
            .trim_start()
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        let scale: f64 = digits.parse().ok()?;
        if scale <= 0.0 {
            return None;
        }
        number / scale
    } else if number > 1.0 {
        // "Confidence: 85" means percent.
        number / 100.0
    } else {
        number
    };
    (0.0..=1.0).contains(&value).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_unanimous_first_wave_settles_the_vote() {
        // 3 models x 3 samples: 5 unanimous votes cannot be caught by 4.
        assert_eq!(first_wave(9), 5);
        assert!(settled(&[5], 4));
        assert!(!settled(&[4], 4), "4 more could tie");
        assert_eq!(first_wave(5), 3);
        assert_eq!(first_wave(1), 1);
        assert_eq!(first_wave(2), 2);
        assert_eq!(first_wave(0), 0);
    }

    #[test]
    fn a_split_vote_asks_for_just_enough_to_possibly_settle() {
        // 3-2 with 4 left: 3 + k > 2 + 4 - k  ->  k = 2.
        assert_eq!(votes_to_settle(&[3, 2], 4), 2);
        // 2-2-1 with 2 left: cannot settle even with both: ask both.
        assert_eq!(votes_to_settle(&[2, 2, 1], 2), 2);
        assert_eq!(votes_to_settle(&[6, 1], 2), 0);
        assert_eq!(votes_to_settle(&[1, 1], 0), 0, "nothing left to ask");
    }

    #[test]
    fn majority_means_more_than_half() {
        assert!(is_majority(4, 7));
        assert!(!is_majority(3, 7));
        assert!(!is_majority(2, 4));
        assert!(is_majority(1, 1));
    }

    /// Every way `remaining` more votes can fall among the answers given
    /// and one nobody gave yet; true if in any of them a rival of the
    /// current leader ends with at least as many votes. Brute force: the
    /// oracle the rule is checked against.
    fn can_be_caught(counts: &[u32], remaining: u32) -> bool {
        let Some(leader) = (0..counts.len()).max_by_key(|&i| (counts[i], std::cmp::Reverse(i)))
        else {
            return remaining > 0;
        };
        let mut tally = counts.to_vec();
        tally.push(0);
        fn spread(tally: &mut Vec<u32>, from: usize, left: u32, leader: usize) -> bool {
            if from == tally.len() - 1 {
                tally[from] += left;
                let caught = tally
                    .iter()
                    .enumerate()
                    .any(|(i, &c)| i != leader && c >= tally[leader]);
                tally[from] -= left;
                return caught;
            }
            (0..=left).any(|k| {
                tally[from] += k;
                let caught = spread(tally, from + 1, left - k, leader);
                tally[from] -= k;
                caught
            })
        }
        spread(&mut tally, 0, remaining, leader)
    }

    proptest! {
        #[test]
        fn it_never_stops_while_the_leader_can_be_caught(
            counts in prop::collection::vec(0u32..8, 0..4),
            remaining in 0u32..9,
        ) {
            prop_assume!(counts.iter().any(|&c| c > 0) || remaining > 0);
            prop_assert_eq!(
                settled(&counts, remaining),
                !can_be_caught(&counts, remaining),
                "{:?} with {} to come", counts, remaining
            );
        }

        #[test]
        fn the_next_wave_is_the_fewest_that_could_settle(
            counts in prop::collection::vec(0u32..15, 0..5),
            remaining in 1u32..25,
        ) {
            let k = votes_to_settle(&counts, remaining);
            prop_assert!(k <= remaining);
            let with = |extra: u32| {
                let mut c = counts.clone();
                match c.iter_mut().max() {
                    Some(top) => *top += extra,
                    None => c.push(extra),
                }
                c
            };
            if settled(&counts, remaining) {
                prop_assert_eq!(k, 0);
            } else {
                prop_assert!(k >= 1);
                // Fewer votes than k, even all to the leader, never settle it.
                prop_assert!(!settled(&with(k - 1), remaining - (k - 1)));
                // k votes all to the leader settle it, unless nothing could.
                if k < remaining || settled(&with(k), 0) {
                    prop_assert!(settled(&with(k), remaining - k));
                }
            }
        }

        #[test]
        fn stated_confidence_is_a_fraction(reply in ".{0,200}") {
            if let Some((c, _)) = stated_confidence(&reply) {
                prop_assert!((0.0..=1.0).contains(&c));
            }
        }
    }

    #[test]
    fn confidence_is_read_in_the_forms_models_write() {
        let (c, rest) = stated_confidence("Paris.\nConfidence: 85%").unwrap();
        assert!((c - 0.85).abs() < 1e-9);
        assert_eq!(rest, "Paris.");
        assert_eq!(stated_confidence("x\n**Confidence:** 0.4").unwrap().0, 0.4);
        assert_eq!(stated_confidence("x\nconfidence = 7/10").unwrap().0, 0.7);
        assert_eq!(stated_confidence("x\nConfidence: 90").unwrap().0, 0.9);
        assert_eq!(stated_confidence("I have no confidence in this."), None);
        assert_eq!(stated_confidence("x\nConfidence: 250%"), None);
        assert_eq!(stated_confidence("Paris."), None);
    }

    fn model(id: &str, input: f64, output: f64) -> ModelInfo {
        ModelInfo {
            id: id.into(),
            provider: "p".into(),
            context_window: None,
            max_output_tokens: None,
            input_price: Some(input),
            output_price: Some(output),
            tags: vec![],
            supported_parameters: None,
            prices_source: None,
            listed: None,
            input_modalities: None,
            extra: "{}".into(),
        }
    }

    fn made(model: &str, cost: Option<f64>) -> Completion {
        use crate::wit::types::{FormatSent, Reply, Usage};
        Completion {
            id: Some(0),
            label: "panel".into(),
            model: model.into(),
            latency_ms: 1,
            attempts: 1,
            outcome: Ok(Reply {
                content: "x".into(),
                served_by: model.into(),
                finish_reason: None,
                usage: Some(Usage {
                    prompt_tokens: 1_000,
                    completion_tokens: 500,
                    reasoning_tokens: None,
                    cost,
                    cost_estimated: false,
                    tokens_estimated: false,
                }),
                format_sent: FormatSent::None,
                citations: Vec::new(),
                tool_calls: Vec::new(),
            }),
        }
    }

    #[test]
    fn the_full_panel_is_priced_model_by_model() {
        // A cascade asked a strong model (reported $0.02) and a cheap check
        // ($0.0001). The panel's other strong model is priced from its
        // catalog prices at this run's call size, not at the mean of the
        // two calls made; an unlisted one at that mean.
        let made = [made("strong", Some(0.02)), made("cheap", Some(0.0001))];
        let prices = [model("other", 3.0, 15.0)];
        let other = (1_000.0 * 3.0 + 500.0 * 15.0) / 1e6;
        let mean = (0.02 + 0.0001) / 2.0;
        let full =
            full_panel_cost(&["strong", "cheap", "other", "unlisted"], &made, &prices).unwrap();
        assert!(
            (full - (0.02 + 0.0001 + other + mean)).abs() < 1e-12,
            "{full}"
        );
        // Nothing reported: no estimate rather than a made-up one.
        assert_eq!(full_panel_cost(&["strong"], &[], &prices), None);
    }

    #[test]
    fn the_account_says_what_was_saved() {
        let mut first = Spend::default();
        for _ in 0..5 {
            first.add(Some(0.0005));
        }
        let account = Account::new(first, 9, first.per_call().map(|c| c * 9.0));
        assert_eq!(account.calls_saved(), 4);
        assert_eq!(
            account.sentence(),
            "Spent 5 calls ($0.0025) against the full panel's 9 (about $0.0045, estimated): 4 calls saved."
        );
        assert_eq!(account.details()["full_panel_cost_usd"], 0.0045);
        let mut unpriced = Spend::default();
        unpriced.add(None);
        let account = Account::new(unpriced, 3, None);
        assert_eq!(
            account.sentence(),
            "Spent 1 calls (cost not reported) against the full panel's 3: 2 calls saved."
        );
        assert_eq!(account.details()["cost_usd"], Value::Null);
    }
}
