//! chorus as users install and run it: the CLI and a terminal, first
//! contact, no config, a cold start, the packages and the container image.

pub(crate) mod cli;
pub(crate) mod cli_door;
pub(crate) mod cold_start;
pub(crate) mod dist;
pub(crate) mod first_contact;
#[cfg(target_os = "linux")]
pub(crate) mod image;
pub(crate) mod no_config;
pub(crate) mod terminal;
