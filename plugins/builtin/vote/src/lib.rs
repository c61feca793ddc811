//! Synthesizer for self-consistency, sampled in waves: answers are
//! normalised (the text after a final "Answer:" if any, case, punctuation,
//! spacing) and the most votes win. The fan-out is the first wave; while
//! the vote is open this plugin asks the panel for more samples through
//! `host.complete`, each wave just large enough that it could settle the
//! vote, and stops as soon as the leader can no longer be caught by the
//! samples still allowed — `samples_per_model` per panel seat at most (the
//! full panel), fewer when the run's calls, cost or time run short. A
//! prompter that sends the whole panel at once (passthrough without
//! `waves`) leaves nothing to ask: the vote is counted as before.
//!
//! The winning answer is returned verbatim; the result says whether it won
//! a majority or only a plurality, how the waves went, and what the vote
//! spent against the full panel.
//!
//! When the run's caller offered tools, an answer that proposes tool calls
//! is a ballot for those calls (equal calls — the same functions, the
//! arguments equal as JSON — are one ballot, never equal to a text), so
//! the vote is also on calls: when a proposal wins, the run's answer is
//! that call. The decision is made here, with the waves, not before the
//! merge (`choose-tool-calls` answers `merge`).
//!
//! ```toml
//! [plugins.vote.settings]
//! samples_per_model = 3   # the ceiling per seat; the call's `samples_per_model` option wins
//! system = "..."          # the system prompt of later waves: the prompter's, if it sets one
//! ```

kit::plugin!(synthesizer, Vote);

use kit::adaptive::{Account, Spend};
use kit::wit::host;
use kit::wit::types::{
    Answer, AnswerKind, ChatRequest, Completion, FailureKind, Plan, Request, Role, Sampling,
};
use serde::Deserialize;
use serde_json::json;

/// As the passthrough prompter's bound: more per seat is a mistake.
const MAX_SAMPLES: u32 = 16;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Settings {
    samples_per_model: Option<u32>,
    system: Option<String>,
}

struct Vote;

/// Why the sampling stopped.
#[derive(Clone, Copy, PartialEq)]
enum Stop {
    /// The leader cannot be caught by the `left` samples the panel still allows.
    Settled { left: u32 },
    /// Every sample the panel allows was asked.
    Exhausted,
    /// The run's calls, or its cost ceiling (`cost`), left too few samples
    /// to settle it.
    Budget { cost: bool },
    /// Too little time to the run's deadline for another wave.
    Time,
}

impl Stop {
    fn name(self) -> &'static str {
        match self {
            Stop::Settled { .. } => "settled",
            Stop::Exhausted => "panel exhausted",
            Stop::Budget { .. } => "budget",
            Stop::Time => "time",
        }
    }
}

/// One model of the panel and how many samples it may give.
struct Voter {
    model: String,
    sampling: Sampling,
    allowance: u32,
}

struct Group<'a> {
    key: String,
    members: Vec<(u32, &'a Completion, &'a str)>,
}

impl Guest for Vote {
    /// A proposal is a ballot like any answer: the vote decides in
    /// `synthesize`, where the waves are.
    const DECIDES_CALLS_WHEN_MERGING: bool = true;

    fn validate_settings(settings: String) -> Result<(), String> {
        let settings = parse(&settings)?;
        match settings.samples_per_model {
            Some(n) if !(1..=MAX_SAMPLES).contains(&n) => Err(format!(
                "samples_per_model must be between 1 and {MAX_SAMPLES}, got {n}"
            )),
            _ => Ok(()),
        }
    }

    fn synthesize(
        request: Request,
        plan: Plan,
        completions: Vec<Completion>,
        settings: String,
    ) -> Result<Answer, String> {
        let settings = parse(&settings)?;
        let samples = kit::count(
            &request.options,
            "samples_per_model",
            settings.samples_per_model,
            1,
            1..=MAX_SAMPLES,
        )?;
        let voters = voters(&plan, samples);
        let ceiling = (voters.iter().map(|v| v.allowance).sum::<u32>())
            .max(u32::try_from(completions.len()).unwrap_or(u32::MAX));
        let mut first = Spend::default();
        first.add_completions(&completions);
        let sampler = Sampler {
            request: &request,
            system: settings.system.as_deref(),
            samples,
            voters: &voters,
            first,
        };
        let (all, waves, stop) = sampler.run(completions);
        let mut spent = Spend::default();
        spent.add_completions(&all);
        let full: Vec<&str> = voters
            .iter()
            .flat_map(|v| std::iter::repeat_n(v.model.as_str(), v.allowance as usize))
            .collect();
        let account = Account::new(
            spent,
            ceiling,
            kit::adaptive::full_panel_cost(&full, &all, &kit::wit::host::models()),
        );
        Ok(count(&all, &waves, stop, ceiling, &account))
    }
}

/// The panel's models, each with its allowance: `samples` per seat.
fn voters(plan: &Plan, samples: u32) -> Vec<Voter> {
    let mut voters: Vec<Voter> = Vec::new();
    for seat in &plan.panel {
        match voters.iter_mut().find(|v| v.model == seat.model) {
            Some(voter) => voter.allowance += samples,
            None => voters.push(Voter {
                model: seat.model.clone(),
                sampling: seat.sampling,
                allowance: samples,
            }),
        }
    }
    voters
}

/// One wave: how many calls it made and how many answered.
struct Wave {
    calls: usize,
    answered: usize,
}

struct Sampler<'a> {
    request: &'a Request,
    system: Option<&'a str>,
    samples: u32,
    voters: &'a [Voter],
    first: Spend,
}

impl Sampler<'_> {
    /// Asks wave after wave until the vote is settled or nothing more may
    /// be asked. Returns every completion (the fan-out first), the waves,
    /// and why it stopped.
    fn run(&self, fan_out: Vec<Completion>) -> (Vec<Completion>, Vec<Wave>, Stop) {
        let mut all = fan_out;
        let mut waves = vec![wave(&all)];
        loop {
            let counts = tally(&all);
            let open = self.open_slots(&all);
            let panel_left = u32::try_from(open.len()).unwrap_or(u32::MAX);
            if panel_left == 0 {
                return (all, waves, Stop::Exhausted);
            }
            if kit::adaptive::settled(&counts, panel_left) {
                return (all, waves, Stop::Settled { left: panel_left });
            }
            let budget = host::budget();
            let by_calls = panel_left.min(budget.calls_left);
            let by_cost = match (budget.cost_left, self.first.per_call()) {
                (Some(left), Some(per_call)) if per_call > 0.0 => {
                    (left / per_call).floor().clamp(0.0, f64::from(u32::MAX)) as u32
                }
                _ => u32::MAX,
            };
            let allowed = by_calls.min(by_cost);
            if allowed == 0 || kit::adaptive::settled(&counts, allowed) {
                let cost = by_cost < by_calls;
                return (all, waves, Stop::Budget { cost });
            }
            if u64::from(slowest(&all)) >= budget.time_left_ms {
                return (all, waves, Stop::Time);
            }
            let size = kit::adaptive::votes_to_settle(&counts, allowed) as usize;
            let requests: Vec<ChatRequest> = open
                .iter()
                .take(size)
                .map(|&(voter, sample)| self.request_for(voter, sample))
                .collect();
            let (leader, runner_up) = leading(&counts);
            host::progress(&format!(
                "vote wave {}: {} more samples (the leader has {leader}, the runner-up {runner_up})",
                waves.len() + 1,
                requests.len()
            ));
            let outcomes = host::complete(&requests);
            let refused = outcomes.iter().find_map(|c| match &c.outcome {
                Err(f) if f.kind == FailureKind::OverBudget => {
                    Some(f.message.contains("max_cost_usd"))
                }
                _ => None,
            });
            waves.push(wave(&outcomes));
            all.extend(outcomes);
            if let Some(cost) = refused {
                return (all, waves, Stop::Budget { cost });
            }
        }
    }

    /// The samples still to ask, in the order a full panel sends them:
    /// every model's next sample before any model's one after. A model
    /// that failed is not asked again.
    fn open_slots(&self, all: &[Completion]) -> Vec<(usize, u32)> {
        let used: Vec<u32> = self
            .voters
            .iter()
            .map(|v| all.iter().filter(|c| c.model == v.model).count() as u32)
            .collect();
        let failed: Vec<bool> = self
            .voters
            .iter()
            .map(|v| {
                all.iter()
                    .any(|c| c.model == v.model && kit::guest::text_of(c).is_err())
            })
            .collect();
        let most = self.voters.iter().map(|v| v.allowance).max().unwrap_or(0);
        let mut open = Vec::new();
        for round in 0..most {
            for (i, voter) in self.voters.iter().enumerate() {
                let sample = used[i] + round;
                if !failed[i] && sample < voter.allowance {
                    open.push((i, sample + 1));
                }
            }
        }
        open
    }

    fn request_for(&self, voter: usize, sample: u32) -> ChatRequest {
        let voter = &self.voters[voter];
        let mut messages = Vec::with_capacity(2);
        if let Some(system) = self.system.filter(|s| !s.trim().is_empty()) {
            messages.push(kit::guest::message(Role::System, system));
        }
        messages.push(kit::guest::message(Role::User, self.request.prompt.clone()));
        let mut sampling = voter.sampling;
        // As the passthrough prompter labels and seeds samples.
        let label = if self.samples == 1 {
            "panel".to_owned()
        } else {
            sampling.seed = Some(u64::from(sample));
            format!("sample {sample}")
        };
        kit::guest::request(&label, &voter.model, messages, sampling)
    }
}

fn wave(completions: &[Completion]) -> Wave {
    Wave {
        calls: completions.iter().filter(|c| c.id.is_some()).count(),
        answered: kit::guest::answered(completions).len(),
    }
}

/// Votes per distinct normalised answer.
fn tally(all: &[Completion]) -> Vec<u32> {
    groups(&kit::guest::answered(all))
        .iter()
        .map(|g| g.members.len() as u32)
        .collect()
}

fn leading(counts: &[u32]) -> (u32, u32) {
    let mut sorted = counts.to_vec();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    (
        sorted.first().copied().unwrap_or(0),
        sorted.get(1).copied().unwrap_or(0),
    )
}

/// The longest an answer took so far: what another wave will likely take.
fn slowest(all: &[Completion]) -> u32 {
    all.iter()
        .filter(|c| c.outcome.is_ok())
        .map(|c| c.latency_ms)
        .max()
        .unwrap_or(0)
}

/// Answers grouped by their ballot (the normalised text, or the proposed
/// calls), most votes first; among equals, the one answered first
/// (stable sort).
fn groups<'a>(answered: &[(u32, &'a Completion, &'a str)]) -> Vec<Group<'a>> {
    let mut groups: Vec<Group> = Vec::new();
    for &(id, completion, text) in answered {
        let key = match kit::calls::of(completion) {
            [] => kit::normalise(text),
            calls => kit::calls::ballot(calls),
        };
        match groups.iter_mut().find(|g| g.key == key) {
            Some(group) => group.members.push((id, completion, text)),
            None => groups.push(Group {
                key,
                members: vec![(id, completion, text)],
            }),
        }
    }
    groups.sort_by_key(|g| std::cmp::Reverse(g.members.len()));
    groups
}

/// The vote over every answer that arrived, with what it took.
fn count(
    all: &[Completion],
    waves: &[Wave],
    stop: Stop,
    ceiling: u32,
    account: &Account,
) -> Answer {
    let answered = kit::guest::answered(all);
    let mut notes = kit::guest::failure_notes(all);
    let groups = groups(&answered);
    let sampling = sampling_note(waves, stop, ceiling, &groups);
    let spend = account.details();
    let Some(winner) = groups.first() else {
        notes.insert(0, sampling);
        return Answer {
            kind: AnswerKind::None,
            text: format!("No model answered ({} tried).", all.len()),
            sources: vec![],
            notes,
            details: json!({ "votes": [], "spend": spend }).to_string(),
            tool_calls: Vec::new(),
        };
    };
    let votes = winner.members.len();
    let cast = answered.len();
    let tied: Vec<&Group> = groups.iter().filter(|g| g.members.len() == votes).collect();
    let tie = tied.len() > 1;
    let majority = kit::adaptive::is_majority(votes, cast);
    let headline = if cast == 1 {
        "Only one answer arrived, so there was nothing to vote on.".to_owned()
    } else if tie {
        let options: Vec<String> = tied
            .iter()
            .map(|g| format!("\"{}\"", shorten(&g.key)))
            .collect();
        format!(
            "Tie: {} answers got {votes} of {cast} votes each ({}); took the one that answered first.",
            tied.len(),
            options.join(", ")
        )
    } else if majority {
        format!("Majority: {votes} of {cast} answers agree.")
    } else {
        format!(
            "Plurality: the winner got {votes} of {cast} votes, a plurality, not a majority — \
             the answers are split."
        )
    };
    notes.splice(0..0, [headline, sampling, account.sentence()]);
    let counts: Vec<_> = groups
        .iter()
        .map(|g| {
            json!({
                "answer": shorten(&g.key),
                "votes": g.members.len(),
                "models": g.members.iter().map(|(_, c, _)| c.model.clone()).collect::<Vec<_>>(),
            })
        })
        .collect();
    let waves: Vec<_> = waves
        .iter()
        .enumerate()
        .map(|(i, w)| json!({"wave": i + 1, "calls": w.calls, "answered": w.answered}))
        .collect();
    let sources = winner.members.iter().map(|(i, _, _)| *i).collect();
    let details = json!({
        "votes": counts,
        "tie": tie,
        "majority": majority && !tie,
        "votes_cast": cast,
        "waves": waves,
        "stopped": stop.name(),
        "spend": spend,
    })
    .to_string();
    let calls = kit::calls::of(winner.members[0].1);
    if !calls.is_empty() {
        let why = notes[0].clone();
        return kit::calls::answer(calls, why, sources, notes, details);
    }
    Answer {
        kind: if cast == 1 {
            AnswerKind::Single
        } else {
            AnswerKind::Vote
        },
        text: winner.members[0].2.to_owned(),
        sources,
        notes,
        details,
        tool_calls: Vec::new(),
    }
}

/// How the sampling went and why it stopped, in a sentence.
fn sampling_note(waves: &[Wave], stop: Stop, ceiling: u32, groups: &[Group]) -> String {
    let calls: usize = waves.iter().map(|w| w.calls).sum();
    let waves = match waves.len() {
        1 => "1 wave".to_owned(),
        n => format!("{n} waves"),
    };
    let why = match stop {
        Stop::Settled { left } => {
            format!("the leader could no longer be overtaken by the {left} samples still allowed")
        }
        Stop::Exhausted if calls < ceiling as usize => {
            "every sample the panel allows was asked, but for models that failed".to_owned()
        }
        Stop::Exhausted => "every sample the panel allows was asked".to_owned(),
        Stop::Budget { cost: false } => {
            "the run's call budget (max_calls_per_run) left too few samples to change the result"
                .to_owned()
        }
        Stop::Budget { cost: true } => {
            "the run's cost ceiling (max_cost_usd) left too few samples to change the result"
                .to_owned()
        }
        Stop::Time => {
            "too little time was left before the run's deadline for another wave".to_owned()
        }
    };
    let open = matches!(stop, Stop::Budget { .. } | Stop::Time) && groups.len() > 1;
    format!(
        "Sampled in {waves}: {calls} of at most {ceiling} calls; stopped because {why}{}.",
        if open {
            ", so more samples could have changed the winner"
        } else {
            ""
        }
    )
}

fn shorten(text: &str) -> String {
    match text.char_indices().nth(120) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// This plugin's settings, or what is wrong with them.
fn parse(settings: &str) -> Result<Settings, String> {
    kit::settings(settings, "optional `samples_per_model` and `system`")
}
