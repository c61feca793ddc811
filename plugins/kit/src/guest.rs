//! The WIT-typed helpers, as a macro each plugin expands next to its own
//! bindings.

/// WIT-typed helpers, expanded inside a plugin crate whose bindings were
/// generated at its root (`wit_bindgen::generate!` in `lib.rs`): every
/// world imports the same `host` and `types`, so one text serves all.
/// `crate::` is deliberate: it names the calling plugin's bindings.
#[allow(clippy::crate_in_macro_def)]
#[macro_export]
macro_rules! guest_helpers {
    () => {
        #[allow(dead_code)]
        mod guest {
            use crate::chorus::strategy::host;
            use crate::chorus::strategy::types::{
                Answer, AnswerKind, ChatRequest, Completion, Failure, Message, Plan, Role,
                Sampling, Seat,
            };

            pub const NO_SAMPLING: Sampling = Sampling {
                temperature: None,
                top_p: None,
                max_tokens: None,
                seed: None,
            };

            pub fn message(role: Role, content: impl Into<String>) -> Message {
                Message {
                    role,
                    content: content.into(),
                }
            }

            pub fn request(
                label: &str,
                model: &str,
                messages: Vec<Message>,
                sampling: Sampling,
            ) -> ChatRequest {
                ChatRequest {
                    label: label.to_owned(),
                    model: model.to_owned(),
                    messages,
                    sampling,
                }
            }

            /// Runs requests at once; each outcome as text or a described failure.
            pub fn complete(requests: &[ChatRequest]) -> Vec<Result<String, String>> {
                host::complete(requests).iter().map(text_of).collect()
            }

            /// One call: system + user message to `model`.
            pub fn ask(
                label: &str,
                model: &str,
                system: &str,
                user: &str,
                sampling: Sampling,
            ) -> Result<String, String> {
                let messages = vec![message(Role::System, system), message(Role::User, user)];
                complete(&[request(label, model, messages, sampling)])
                    .pop()
                    .unwrap_or_else(|| Err("the host returned no outcome".to_owned()))
            }

            pub fn text_of(completion: &Completion) -> Result<String, String> {
                match &completion.outcome {
                    Ok(reply) if !reply.content.trim().is_empty() => Ok(reply.content.clone()),
                    Ok(_) => Err("empty answer".to_owned()),
                    Err(failure) => Err(describe(failure)),
                }
            }

            pub fn describe(failure: &Failure) -> String {
                $crate::describe_failure(
                    &format!("{:?}", failure.kind),
                    failure.status,
                    &failure.message,
                )
            }

            /// The completions that answered: (index, completion, text).
            pub fn answered(completions: &[Completion]) -> Vec<(u32, &Completion, &str)> {
                completions
                    .iter()
                    .enumerate()
                    .filter_map(|(i, c)| match &c.outcome {
                        Ok(reply) if !reply.content.trim().is_empty() => {
                            Some((i as u32, c, reply.content.as_str()))
                        }
                        _ => None,
                    })
                    .collect()
            }

            /// One note per completion that did not answer.
            pub fn failure_notes(completions: &[Completion]) -> Vec<String> {
                completions
                    .iter()
                    .filter_map(|c| text_of(c).err().map(|e| format!("{} failed: {e}", c.model)))
                    .collect()
            }

            /// A merge that succeeded: who merged, the text, what to tell the user.
            pub struct Merged {
                pub model: String,
                pub text: String,
                pub notes: Vec<String>,
            }

            /// Merges `answers` (heading, text) with the first of
            /// `synthesizers` that succeeds, fitting them to its context
            /// window. `Err` carries every synthesizer's own error.
            pub fn merge(
                question: &str,
                answers: &[(String, String)],
                synthesizers: &[String],
                instructions: &str,
                sampling: Sampling,
            ) -> Result<Merged, Vec<(String, String)>> {
                let mut cut_note = None;
                let (found, errors) = $crate::first_success(synthesizers, |model| {
                    let texts: Vec<&str> = answers.iter().map(|(_, t)| t.as_str()).collect();
                    let (texts, cut) = $crate::fit(&texts, context_window(model));
                    cut_note = cut.map(|c| format!("To fit {model}'s context window, {c}."));
                    let mut prompt = format!("Question:\n{question}\n\n");
                    for ((heading, _), text) in answers.iter().zip(&texts) {
                        prompt.push_str(&format!("--- {heading} ---\n{}\n\n", text.trim()));
                    }
                    prompt.push_str("Write the best answer to the question.");
                    host::progress(&format!("merging {} answers with {model}", answers.len()));
                    ask("synthesis", model, instructions, &prompt, sampling)
                });
                match found {
                    Some((model, text)) => {
                        let mut notes =
                            $crate::fallback_notes("Synthesizer", &errors, Some(&model));
                        notes.extend(cut_note);
                        Ok(Merged { model, text, notes })
                    }
                    None => Err(errors),
                }
            }

            /// A plan of model ids with default sampling; the synthesizers
            /// default to the first panel model.
            pub fn plan(panel: Vec<String>, synthesizers: Vec<String>, notes: Vec<String>) -> Plan {
                let synthesizers = if synthesizers.is_empty() {
                    panel.iter().take(1).cloned().collect()
                } else {
                    synthesizers
                };
                let panel = panel
                    .into_iter()
                    .map(|model| Seat {
                        model,
                        sampling: NO_SAMPLING,
                    })
                    .collect();
                Plan {
                    panel,
                    synthesizers,
                    notes,
                }
            }

            /// The answer when fewer than two completions answered: `none`
            /// with every failure, or the lone survivor verbatim as `single`
            /// (never a synthesis). `why` ends "Only M answered, so …".
            pub fn too_few(completions: &[Completion], why: &str) -> Option<Answer> {
                let answered = answered(completions);
                let mut notes = failure_notes(completions);
                let (kind, text, sources) = match answered.as_slice() {
                    [] => (
                        AnswerKind::None,
                        format!("No model answered ({} tried).", completions.len()),
                        vec![],
                    ),
                    [(index, completion, text)] => {
                        notes.insert(0, format!("Only {} answered, so {why}.", completion.model));
                        (AnswerKind::Single, (*text).to_owned(), vec![*index])
                    }
                    _ => return None,
                };
                Some(Answer {
                    kind,
                    text,
                    sources,
                    notes,
                    details: String::new(),
                })
            }

            /// How a strategy that ends in a merge answers: the merger's
            /// text as a `synthesis`, or — when every merger failed — the
            /// answers side by side (`unmerged`) with each merger's own
            /// error. `headline(model)` may open the notes of a synthesis.
            pub fn settle(
                merge: Result<Merged, Vec<(String, String)>>,
                role: &str,
                headline: impl FnOnce(&str) -> Option<String>,
                answers: &[(&str, &str)],
                sources: Vec<u32>,
                mut notes: Vec<String>,
                details: String,
            ) -> Answer {
                match merge {
                    Ok(merged) => {
                        if let Some(headline) = headline(&merged.model) {
                            notes.insert(0, headline);
                        }
                        notes.extend(merged.notes);
                        Answer { kind: AnswerKind::Synthesis, text: merged.text, sources, notes, details }
                    }
                    Err(errors) => {
                        let n = answers.len();
                        let headline = if errors.is_empty() {
                            format!("No {role} in the plan, so the {n} answers are shown side by side.")
                        } else {
                            let causes: Vec<String> = errors.iter().map(|(m, e)| format!("{m}: {e}")).collect();
                            format!("Every {role} failed, so the {n} answers are shown side by side. {}", causes.join("; "))
                        };
                        notes.insert(0, headline);
                        Answer { kind: AnswerKind::Unmerged, text: $crate::side_by_side(answers), sources, notes, details }
                    }
                }
            }

            /// The context window the catalog gives `model`, if any.
            pub fn context_window(model: &str) -> Option<u32> {
                host::models()
                    .into_iter()
                    .find(|m| m.id == model)
                    .and_then(|m| m.context_window)
            }
        }
    };
}
