//! The strategies and their plugins: each built-in strategy, selectors,
//! fitting, stragglers, fallbacks, plugin budgets and the sandbox, plugins
//! in other languages, scaffolding, OCI registries, dry runs, eval.

pub(crate) mod adaptive;
pub(crate) mod analysis;
// wait4 measures the CPU a run took: Unix only.
#[cfg(unix)]
pub(crate) mod deadlines;
pub(crate) mod dry_run;
pub(crate) mod ensembles;
pub(crate) mod eval;
pub(crate) mod fallbacks;
pub(crate) mod fitting;
pub(crate) mod oci_plugins;
pub(crate) mod plugin_attachments;
pub(crate) mod polyglot;
pub(crate) mod sandbox;
pub(crate) mod scaffold;
pub(crate) mod selectors;
pub(crate) mod stragglers;
pub(crate) mod toolchains;
