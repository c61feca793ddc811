//! The HTTP front door and what it serves: tokens, Host/Origin, hostile
//! clients, teams and tenants, drain, /metrics, traces, the viewer, the
//! OpenAI endpoint, Anthropic's Messages API, sign-in.

pub(crate) mod anthropic;
pub(crate) mod claude_code;
pub(crate) mod drain;
mod experiments;
mod feedback;
pub(crate) mod http;
pub(crate) mod metrics;
pub(crate) mod openai;
pub(crate) mod serving;
pub(crate) mod sign_in;
pub(crate) mod teams;
pub(crate) mod tenants;
pub(crate) mod traces;
pub(crate) mod viewer;
