//! Helpers shared by chorus's Rust strategy plugins: the contract's bindings,
//! generated once (`wit`) and reused by every plugin through wit-bindgen's
//! `with`; helpers over those types (`guest`, `seeing` for attachments,
//! `sources` for web citations); and plain-text helpers.
//!
//! Model replies are outside data: every parser here accepts what models
//! actually write (code fences, prose around JSON, numbered lists) and
//! returns `None` rather than guessing when it finds nothing usable.

pub mod adaptive;
pub mod analysis;
pub mod calls;
mod chain;
pub mod formats;
pub mod guest;
mod options;
mod plugin;
mod reply;
pub mod seeing;
mod shape;
pub mod sources;
pub mod wit;

pub use chain::{ModelText, describe_failure, fallback_notes, first_success};
pub use options::{count, no_settings, option_u32, settings};
pub use plugin::Synthesizer;
pub use reply::{extract_json, extract_list, extract_object, normalise, numbers, similarity};
pub use shape::{
    CHARS_PER_TOKEN, CUT_MARKER, Fitted, MIN_SHARE_CHARS, Room, TooSmall, fit, letter, shuffle,
    side_by_side,
};

#[cfg(test)]
mod tests;
