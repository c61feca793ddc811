//! Helpers shared by chorus's Rust strategy plugins. The functions are plain
//! Rust with no WIT types (each plugin keeps its own bindings and passes
//! strings in); `guest_helpers!` expands the WIT-typed helpers inside each
//! plugin, next to its bindings.
//!
//! Model replies are outside data: every parser here accepts what models
//! actually write (code fences, prose around JSON, numbered lists) and
//! returns `None` rather than guessing when it finds nothing usable.

mod chain;
mod guest;
mod options;
mod reply;
mod shape;

pub use chain::{ModelText, describe_failure, fallback_notes, first_success};
pub use options::{count, option_u32, settings};
pub use reply::{extract_json, extract_list, normalise, similarity};
pub use shape::{fit, letter, shuffle, side_by_side};

#[cfg(test)]
mod tests;
