//! `chorus models [QUERY]`: what the providers list (ids, context windows,
//! prices), fetched or from the on-disk cache, filtered by QUERY; models
//! in the configuration's `[models]` are marked.

// A terminal command: its output is the point, and it never runs under
// `serve` (see `crate::notice`).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::Write;
use std::process::ExitCode;

use serde::Serialize;

use crate::app::Chorus;
use crate::llm::{Listed, show_price};

#[derive(clap::Args)]
pub struct Args {
    /// Show models whose id or name contains this (case-insensitive).
    query: Option<String>,
    /// Only this provider's list.
    #[arg(long)]
    provider: Option<String>,
    /// Fetch the lists again, even when the cached copy is fresh.
    #[arg(long)]
    refresh: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    pub gateway: super::gateway::Gateway,
}

#[derive(Serialize)]
struct Row<'a> {
    provider: &'a str,
    #[serde(flatten)]
    model: &'a Listed,
    /// In the configuration's `[models]`.
    configured: bool,
}

pub async fn run(chorus: &Chorus, args: Args) -> ExitCode {
    let runner = chorus.runner();
    let llm = &runner.llm;
    if let Some(p) = &args.provider
        && !llm.providers().contains(&p.as_str())
    {
        eprintln!(
            "chorus: no provider named `{p}` (defined: {})",
            llm.providers().join(", ")
        );
        return ExitCode::from(2);
    }
    let statuses = llm.load_catalogs(args.refresh).await;
    let configured = llm.models();
    let query = args.query.as_deref().map(str::to_lowercase);
    let matches = |m: &Listed| {
        query.as_deref().is_none_or(|q| {
            m.id.to_lowercase().contains(q)
                || m.name
                    .as_deref()
                    .is_some_and(|n| n.to_lowercase().contains(q))
        })
    };
    let mut rows = Vec::new();
    let mut failed = 0;
    let wanted = statuses
        .iter()
        .filter(|s| args.provider.as_deref().is_none_or(|p| p == s.provider));
    for status in wanted.clone() {
        match &status.result {
            Ok(catalog) => rows.extend(catalog.models.iter().filter(|m| matches(m)).map(|m| {
                Row {
                    provider: &status.provider,
                    model: m,
                    configured: configured
                        .get(&m.id)
                        .is_some_and(|c| c.provider == status.provider),
                }
            })),
            Err(why) => {
                failed += 1;
                eprintln!(
                    "chorus: provider `{}` has no model list: {why}",
                    status.provider
                );
            }
        }
    }
    if wanted.clone().next().is_none() {
        eprintln!("chorus: no provider has `catalog = true`; nothing to list");
        return ExitCode::from(1);
    }
    let mut out = std::io::stdout().lock();
    let written = if args.json {
        serde_json::to_string_pretty(&rows)
            .map_err(std::io::Error::other)
            .and_then(|text| writeln!(out, "{text}"))
    } else {
        table(&mut out, &statuses, &rows, args.provider.as_deref())
    };
    if let Err(e) = written
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        eprintln!("chorus: {e}");
        return ExitCode::FAILURE;
    }
    if failed > 0 && rows.is_empty() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn table(
    out: &mut impl Write,
    statuses: &[crate::llm::CatalogStatus],
    rows: &[Row],
    only: Option<&str>,
) -> std::io::Result<()> {
    for status in statuses {
        if only.is_some_and(|p| p != status.provider) {
            continue;
        }
        let Ok(catalog) = &status.result else {
            continue;
        };
        writeln!(out, "{} ({})", status.provider, catalog.describe())?;
        let mine: Vec<&Row> = rows
            .iter()
            .filter(|r| r.provider == status.provider)
            .collect();
        if mine.is_empty() {
            writeln!(out, "  (none match)")?;
            continue;
        }
        writeln!(
            out,
            "  {:<48} {:>9} {:>10} {:>10}",
            "id (* = in [models])", "context", "in $/M", "out $/M"
        )?;
        for row in mine {
            let m = row.model;
            let mark = if row.configured { "*" } else { " " };
            let window = m
                .context_window
                .map(|w| w.to_string())
                .unwrap_or_else(|| "-".to_owned());
            writeln!(
                out,
                "{mark} {:<48} {window:>9} {:>10} {:>10}",
                m.id,
                show_price(m.input_price),
                show_price(m.output_price)
            )?;
        }
    }
    Ok(())
}
