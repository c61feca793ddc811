//! Where a shadow experiment stands: how often the candidate synthesizer's
//! merge beat the pipeline's own, judged on the same panel answers in both
//! orders, with an anytime-valid interval on that rate (a tie counts half),
//! what each merge and the judge cost per run, and the day's budget.

use serde::Serialize;

use super::sequence;
use crate::config::{Experiment, Shadow};
use crate::store::experiments::{Outcome, ShadowTally};

/// Which of two answers a judge preferred.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    A,
    B,
    Tie,
}

/// What the judge is asked: the question and two answers, labelled by
/// position; asked twice, with the positions swapped.
pub fn judge_prompt(question: &str, a: &str, b: &str) -> String {
    format!(
        "You compare two answers to the same question.\n\nQuestion:\n{question}\n\n\
         [Answer A]\n{a}\n[End of answer A]\n\n[Answer B]\n{b}\n[End of answer B]\n\n\
         Which answer is better: more correct, more complete, clearer? Reply with A, B or TIE \
         on the first line, then one sentence why."
    )
}

/// The judge's pick, from the first word of its reply (`None`: no pick).
pub fn pick_of(reply: &str) -> Option<Pick> {
    let first = reply
        .split(|c: char| !c.is_alphanumeric())
        .find(|w| !w.is_empty())?
        .to_uppercase();
    match first.as_str() {
        "A" => Some(Pick::A),
        "B" => Some(Pick::B),
        "TIE" => Some(Pick::Tie),
        _ => None,
    }
}

/// For the candidate: asked first with the pipeline's merge as A, then
/// with the candidate's as A. It wins only when both orders prefer it,
/// loses only when both prefer the pipeline's; anything else (a tie, a
/// disagreement, no pick) is a tie, so a judge that favours a position
/// cannot decide.
pub fn outcome(baseline_first: Option<Pick>, candidate_first: Option<Pick>) -> Outcome {
    match (baseline_first, candidate_first) {
        (Some(Pick::B), Some(Pick::A)) => Outcome::Win,
        (Some(Pick::A), Some(Pick::B)) => Outcome::Loss,
        _ => Outcome::Tie,
    }
}

/// A shadow experiment's standing.
#[derive(Debug, Clone, Serialize)]
pub struct Standing {
    pub name: String,
    pub pipeline: String,
    pub synthesizer: String,
    pub judge: String,
    pub share: f64,
    pub confidence: f64,
    pub judged: u64,
    pub wins: u64,
    pub losses: u64,
    pub ties: u64,
    /// (wins + ties / 2) / judged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub win_rate: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval: Option<[f64; 2]>,
    /// Per judged run: the pipeline's own merge, the candidate's, the judge.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline_cost_per_run_usd: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub candidate_cost_per_run_usd: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judge_cost_per_run_usd: Option<f64>,
    pub spent_today_usd: f64,
    pub budget_usd_per_day: f64,
    /// In words: `judging`, `the candidate is better …`, `worse …`, or
    /// that today's budget is spent.
    pub status: String,
}

impl Standing {
    pub fn of(
        name: &str,
        experiment: &Experiment,
        shadow: &Shadow,
        tally: &ShadowTally,
    ) -> Standing {
        let judged = tally.judged();
        let per_run = |sum: f64| (judged > 0).then(|| sum / judged as f64);
        let score = tally.wins as f64 + tally.ties as f64 / 2.0;
        let interval = (judged > 0).then(|| {
            let i = sequence::interval(judged, score, 1.0 - experiment.confidence());
            [i.low, i.high]
        });
        let confident = format!("{:.0} %", experiment.confidence() * 100.0);
        let mut status = match interval {
            Some([low, _]) if low > 0.5 => format!(
                "the candidate `{}` is better than `{}`'s own merge at {confident} confidence (anytime-valid)",
                shadow.synthesizer,
                experiment.pipeline.as_deref().unwrap_or("")
            ),
            Some([_, high]) if high < 0.5 => format!(
                "the candidate `{}` is worse than `{}`'s own merge at {confident} confidence (anytime-valid)",
                shadow.synthesizer,
                experiment.pipeline.as_deref().unwrap_or("")
            ),
            _ => "judging".to_owned(),
        };
        if tally.spent_since_usd >= shadow.budget_usd_per_day {
            status.push_str("; today's budget is spent: no run is judged until midnight UTC");
        }
        Standing {
            name: name.to_owned(),
            pipeline: experiment.pipeline.clone().unwrap_or_default(),
            synthesizer: shadow.synthesizer.clone(),
            judge: shadow.judge.clone(),
            share: shadow.share,
            confidence: experiment.confidence(),
            judged,
            wins: tally.wins,
            losses: tally.losses,
            ties: tally.ties,
            win_rate: (judged > 0).then(|| score / judged as f64),
            interval,
            baseline_cost_per_run_usd: per_run(tally.baseline_cost_usd),
            candidate_cost_per_run_usd: per_run(tally.candidate_cost_usd),
            judge_cost_per_run_usd: per_run(tally.judge_cost_usd),
            spent_today_usd: tally.spent_since_usd,
            budget_usd_per_day: shadow.budget_usd_per_day,
            status,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_orders_must_agree_for_a_win_or_a_loss() {
        assert_eq!(outcome(Some(Pick::B), Some(Pick::A)), Outcome::Win);
        assert_eq!(outcome(Some(Pick::A), Some(Pick::B)), Outcome::Loss);
        // A judge that always says A favours a position, not an answer.
        assert_eq!(outcome(Some(Pick::A), Some(Pick::A)), Outcome::Tie);
        assert_eq!(outcome(None, Some(Pick::A)), Outcome::Tie);
        assert_eq!(pick_of("**B** — it cites"), Some(Pick::B));
        assert_eq!(pick_of("tie: both fine"), Some(Pick::Tie));
        assert_eq!(pick_of("Answer A"), None);
    }

    #[test]
    fn a_candidate_that_wins_beyond_doubt_is_said_better_and_a_spent_budget_said() {
        let experiment: Experiment = toml::from_str(
            "pipeline = \"ask\"\nshadow = { synthesizer = \"mine\", share = 0.5, judge = \"j\", budget_usd_per_day = 1.0 }",
        )
        .unwrap();
        let shadow = experiment.shadow.clone().unwrap();
        let tally = ShadowTally {
            wins: 70,
            losses: 5,
            ties: 5,
            candidate_cost_usd: 0.8,
            judge_cost_usd: 0.4,
            spent_since_usd: 1.2,
            ..ShadowTally::default()
        };
        let standing = Standing::of("t", &experiment, &shadow, &tally);
        assert_eq!(standing.judged, 80);
        assert!((standing.win_rate.unwrap() - 72.5 / 80.0).abs() < 1e-9);
        assert!(
            standing
                .status
                .starts_with("the candidate `mine` is better"),
            "{}",
            standing.status
        );
        assert!(
            standing.status.contains("budget is spent"),
            "{}",
            standing.status
        );
        assert_eq!(standing.candidate_cost_per_run_usd, Some(0.01));
        let even = ShadowTally {
            wins: 3,
            losses: 3,
            ties: 2,
            ..ShadowTally::default()
        };
        assert_eq!(
            Standing::of("t", &experiment, &shadow, &even).status,
            "judging"
        );
    }
}
