//! Shaping what plugins send and show: anonymous names, per-run shuffles,
//! texts fitted to a context window, answers side by side.

/// A deterministic permutation of `0..n` seeded by `seed` (the run id), so
/// a run can be replayed and every run is shuffled differently.
pub fn shuffle(seed: &str, n: usize) -> Vec<usize> {
    let mut state = seed.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    let mut next = || {
        // splitmix64
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    order
}

/// "A", "B", … "Z", "AA", …: anonymous names for candidates.
pub fn letter(i: usize) -> String {
    let mut n = i;
    let mut name = String::new();
    loop {
        name.insert(0, (b'A' + (n % 26) as u8) as char);
        if n < 26 {
            return name;
        }
        n = n / 26 - 1;
    }
}

/// Characters per token we assume when we cannot tokenize: deliberately
/// low, so a fitted prompt errs on the side of fitting.
pub const CHARS_PER_TOKEN: u64 = 3;
/// The share of a window kept for the reply when the request sets no
/// `max_tokens` (a quarter), and the most kept that way.
const REPLY_SHARE_DIVISOR: u64 = 4;
const MAX_REPLY_RESERVE: u64 = 8_192;
/// Characters counted for each text's heading ("--- Answer 3 ---").
const FRAMING_CHARS: usize = 40;
/// Below this many characters per answer, a merge would rest on stubs: the
/// model is skipped (the next, bigger one is tried) rather than fed them.
pub const MIN_SHARE_CHARS: usize = 600;
/// What ends a text that was cut; counted in the budget.
pub const CUT_MARKER: &str = "\n[… cut to fit the context window]";

/// The room a prompt has for the texts it carries: the model's window, less
/// the reply, the instructions, the question and the headings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Room {
    /// The model's context window in tokens; `None` when unknown (nothing
    /// is cut).
    pub window: Option<u32>,
    /// Characters of the prompt besides the texts: instructions, question.
    pub overhead_chars: usize,
    /// Tokens the reply may use, when the request says (`max_tokens`).
    pub reply_tokens: Option<u32>,
}

impl Room {
    /// The room in `window` for texts sent along with `parts` (system
    /// prompt, question, closing instruction) and a reply of at most
    /// `reply_tokens`.
    pub fn new(window: Option<u32>, parts: &[&str], reply_tokens: Option<u32>) -> Self {
        Self {
            window,
            overhead_chars: parts.iter().map(|p| p.chars().count()).sum(),
            reply_tokens,
        }
    }

    /// Tokens kept for the reply: `max_tokens` when set, else a quarter
    /// of the window up to 8,192 — a small window is not eaten whole.
    pub fn reply_reserve(window: u32, reply_tokens: Option<u32>) -> u64 {
        reply_tokens.map_or_else(
            || (u64::from(window) / REPLY_SHARE_DIVISOR).min(MAX_REPLY_RESERVE),
            u64::from,
        )
    }

    /// Characters `n` texts may take together; `None` when unbounded.
    pub fn budget(&self, n: usize) -> Option<usize> {
        let window = self.window?;
        let reply = Self::reply_reserve(window, self.reply_tokens);
        let chars = u64::from(window).saturating_sub(reply) * CHARS_PER_TOKEN;
        let chars = usize::try_from(chars).unwrap_or(usize::MAX);
        Some(chars.saturating_sub(self.overhead_chars + FRAMING_CHARS * n))
    }
}

/// Texts fitted to a room, and what was cut, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fitted {
    pub texts: Vec<String>,
    /// "the answers were cut to K of N characters", when anything was.
    pub cut: Option<String>,
}

/// A room too small to be worth filling: each text would keep `share`
/// characters, under `MIN_SHARE_CHARS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooSmall {
    pub window: u32,
    pub share: usize,
}

impl std::fmt::Display for TooSmall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "its context window of {} tokens leaves {} characters per answer once the \
             instructions, the question and the reply are counted, under the {} a merge needs",
            self.window, self.share, MIN_SHARE_CHARS
        )
    }
}

/// Fits `texts` to `room`. Short texts stay whole and the long ones share
/// what is left equally (each cut to the same length, marked). `Err` when
/// a text would have to be cut below `MIN_SHARE_CHARS`: better another
/// model, or no merge, than a merge of stubs.
pub fn fit(texts: &[&str], room: Room) -> Result<Fitted, TooSmall> {
    let whole = || Fitted {
        texts: texts.iter().map(|t| (*t).to_owned()).collect(),
        cut: None,
    };
    let Some(budget) = room.budget(texts.len()) else {
        return Ok(whole());
    };
    let lengths: Vec<usize> = texts.iter().map(|t| t.chars().count()).collect();
    let total: usize = lengths.iter().sum();
    if total <= budget {
        return Ok(whole());
    }
    let cap = common_cap(&lengths, budget);
    let marker = CUT_MARKER.chars().count();
    if cap < MIN_SHARE_CHARS + marker {
        return Err(TooSmall {
            window: room.window.unwrap_or(0),
            share: cap.saturating_sub(marker),
        });
    }
    let keep = cap - marker;
    let texts = texts
        .iter()
        .zip(&lengths)
        .map(|(t, &len)| {
            if len <= cap {
                (*t).to_owned()
            } else {
                let mut cut: String = t.chars().take(keep).collect();
                cut.push_str(CUT_MARKER);
                cut
            }
        })
        .collect();
    let kept: usize = lengths
        .iter()
        .map(|&len| if len <= cap { len } else { keep })
        .sum();
    Ok(Fitted {
        texts,
        cut: Some(format!(
            "the answers were cut to {kept} of {total} characters"
        )),
    })
}

/// The largest length `cap` such that the texts, each cut to at most
/// `cap`, take at most `budget` together (texts shorter than `cap` keep
/// what they have, and leave the rest to the longer ones).
fn common_cap(lengths: &[usize], budget: usize) -> usize {
    let mut sorted = lengths.to_vec();
    sorted.sort_unstable();
    let mut left = budget;
    for (i, &len) in sorted.iter().enumerate() {
        let sharing = sorted.len() - i;
        if len.saturating_mul(sharing) > left {
            return left / sharing;
        }
        left -= len;
    }
    usize::MAX
}

/// Answers side by side under their models' names: what a result carries
/// when merging them failed.
pub fn side_by_side(answers: &[(&str, &str)]) -> String {
    answers
        .iter()
        .map(|(model, text)| format!("## {model}\n\n{}", text.trim()))
        .collect::<Vec<_>>()
        .join("\n\n")
}
