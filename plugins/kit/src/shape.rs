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

/// Characters per token we assume when we cannot tokenize: deliberately low.
const CHARS_PER_TOKEN: u64 = 3;
/// Tokens kept free for the instructions, the question and the reply.
const RESERVED_TOKENS: u64 = 8_192;

/// Cuts texts to a common length when together they would not fit a
/// context window. Returns them and, if anything was cut, a sentence
/// saying how much.
pub fn fit(texts: &[&str], context_window: Option<u32>) -> (Vec<String>, Option<String>) {
    let whole = || texts.iter().map(|t| (*t).to_owned()).collect();
    let Some(window) = context_window else {
        return (whole(), None);
    };
    let budget = (u64::from(window).saturating_sub(RESERVED_TOKENS) * CHARS_PER_TOKEN) as usize;
    let total: usize = texts.iter().map(|t| t.chars().count()).sum();
    if total <= budget {
        return (whole(), None);
    }
    let share = budget / texts.len().max(1);
    let fitted = texts
        .iter()
        .map(|t| {
            if t.chars().count() <= share {
                (*t).to_owned()
            } else {
                let mut cut: String = t.chars().take(share).collect();
                cut.push_str("\n[… cut to fit the context window]");
                cut
            }
        })
        .collect();
    let kept: usize = texts.iter().map(|t| t.chars().count().min(share)).sum();
    (
        fitted,
        Some(format!(
            "the answers were cut to {kept} of {total} characters"
        )),
    )
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
