//! `chorus ask --attach`: the files the question comes with, read as the
//! user names them (the terminal is theirs: no roots apply), `-` from
//! stdin with its type checked against `--attach-type`.

use std::io::Read;

use super::Args;
use crate::attach;

/// The `--attach` files, read (whatever the user names: the CLI is theirs)
/// and held to the configured limits.
pub(super) fn read(args: &Args, limits: &attach::Limits) -> Result<attach::Attachments, String> {
    let stdin_prompt = args.prompt.as_deref().is_none_or(|p| p == "-");
    let mut sources = Vec::with_capacity(args.attach.len());
    for path in &args.attach {
        if path.as_os_str() != "-" {
            sources.push(attach::Source::Path(path.clone()));
            continue;
        }
        if stdin_prompt {
            return Err(
                "`--attach -` reads the attachment from stdin: give the prompt as an argument"
                    .into(),
            );
        }
        let Some(claimed) = &args.attach_type else {
            return Err("`--attach -` needs --attach-type, e.g. --attach-type image/png".into());
        };
        let mut bytes = Vec::new();
        let cap = limits.max_attachment_bytes as u64 + 1;
        std::io::stdin()
            .lock()
            .take(cap)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("cannot read the attachment from stdin: {e}"))?;
        if let Ok((_, found)) = attach::sniff::sniff(&bytes)
            && found != claimed.as_str()
            && !(found == "text/plain" && claimed.starts_with("text/"))
        {
            return Err(format!(
                "the bytes on stdin are {found}, not {claimed} (--attach-type)"
            ));
        }
        sources.push(attach::Source::Bytes {
            bytes,
            name: Some("stdin".to_owned()),
        });
    }
    attach::load(sources, &attach::Access::Anywhere, limits)
}
