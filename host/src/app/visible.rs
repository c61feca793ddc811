//! The runs a client may build on or read: by id, unique prefix or `last`,
//! among its own runs (every run, for an admin) — another client's run is
//! unknown, as if it did not exist — the pages of runs it may list, and
//! the conversation a follow-up continues.

use crate::client::Client;
use crate::pipeline::follow_up::{MAX_TURNS, NOT_KEPT, TOO_LONG};
use crate::pipeline::{Conversation, RunError, Turn};
use crate::record::{AnswerKind, RunStatus, StoredRun};
use crate::store::{CallLookup, Exchange, Lookup, Page, Query, StoreError};

use super::Chorus;

impl Chorus {
    /// The run with this id, a unique prefix of one, or `last`, whoever
    /// made it.
    pub async fn find_run(
        &self,
        id: &str,
        with_requests: bool,
    ) -> Result<Lookup<StoredRun>, StoreError> {
        let id = id.to_owned();
        self.store
            .off_runtime(move |store| store.find(&id, with_requests))
            .await
    }

    /// Call `call_id` of the run `run_id` (in full), read on its own.
    pub async fn find_call(
        &self,
        run_id: &str,
        call_id: u32,
        with_request: bool,
    ) -> Result<CallLookup, StoreError> {
        let run_id = run_id.to_owned();
        self.store
            .off_runtime(move |store| store.call(&run_id, call_id, with_request))
            .await
    }

    /// A page of kept runs, newest first.
    pub async fn list_runs(&self, query: Query) -> Result<Page, StoreError> {
        self.store
            .off_runtime(move |store| store.list(&query))
            .await
    }

    /// `progress`, and the store, the metrics, the viewer's live pages and
    /// the run's trace (if any) watching the run too.
    /// The run with this id, a unique prefix of one, or `last`, among the
    /// runs `client` may see: another client's run is `Unknown`, as if it
    /// did not exist.
    pub async fn find_run_for(
        &self,
        client: &Client,
        id: &str,
        with_requests: bool,
    ) -> Result<Lookup<StoredRun>, StoreError> {
        let id = match (client.only_own(), id) {
            (Some(own), "last") => {
                let query = Query {
                    client: Some(own.to_owned()),
                    limit: 1,
                    ..Query::default()
                };
                match self.list_runs(query).await?.runs.into_iter().next() {
                    Some(run) => run.run_id,
                    None => return Ok(Lookup::Unknown),
                }
            }
            _ => id.to_owned(),
        };
        Ok(match self.find_run(&id, with_requests).await? {
            Lookup::Found(run) if !client.may_see(run.client.as_deref()) => Lookup::Unknown,
            Lookup::Ambiguous(_) if !client.admin => {
                // Which ids share the prefix would tell of others' runs.
                let query = Query {
                    client: Some(client.name.clone()),
                    limit: 10_000,
                    ..Query::default()
                };
                let mut own: Vec<String> = self
                    .list_runs(query)
                    .await?
                    .runs
                    .into_iter()
                    .map(|r| r.run_id)
                    .filter(|r| r.starts_with(&id))
                    .collect();
                match own.len() {
                    0 => Lookup::Unknown,
                    1 => {
                        return Box::pin(self.find_run_for(client, &own.remove(0), with_requests))
                            .await;
                    }
                    _ => Lookup::Ambiguous(own.into_iter().take(3).collect()),
                }
            }
            found => found,
        })
    }

    /// A page of the runs `client` may see that `query` matches: a client
    /// that is not an admin lists only its own, whatever `query.client`
    /// asks for.
    pub async fn list_runs_for(
        &self,
        client: &Client,
        mut query: Query,
    ) -> Result<Page, StoreError> {
        if let Some(own) = client.only_own() {
            query.client = Some(own.to_owned());
        }
        self.list_runs(query).await
    }

    /// The run store as `client` may see it named: where it lies (a file
    /// path, a database host) is for an admin, not for every tenant.
    pub fn store_as_shown_to(&self, client: &Client) -> String {
        if client.admin {
            self.store.describe()
        } else {
            self.store.describe_for_clients()
        }
    }

    /// A run another builds on, by id, unique prefix or `last`, among the
    /// runs `client` may see.
    pub(super) async fn kept_run(&self, client: &Client, id: &str) -> Result<StoredRun, RunError> {
        match self.find_run_for(client, id, false).await {
            Ok(Lookup::Found(run)) => Ok(run),
            Ok(Lookup::Unknown) => Err(RunError::UnknownRun {
                id: id.to_owned(),
                why: format!(
                    "the id is unknown to {} (list the runs with `chorus runs` or resources/list)",
                    self.store_as_shown_to(client)
                ),
            }),
            Ok(Lookup::Ambiguous(ids)) => Err(RunError::UnknownRun {
                id: id.to_owned(),
                why: format!(
                    "several runs start with it ({}, …): give more of the id",
                    ids.join(", ")
                ),
            }),
            Err(e) => Err(RunError::UnusableRun {
                id: id.to_owned(),
                problem: format!("cannot be read: {e}"),
            }),
        }
    }

    /// The conversation that a follow-up of run `id` continues: that run
    /// and the runs it followed up in turn, as far back as they are kept;
    /// and that run itself.
    pub(super) async fn conversation(
        &self,
        client: &Client,
        id: &str,
    ) -> Result<(Conversation, StoredRun), RunError> {
        let run = self.kept_run(client, id).await?;
        let problem = match (run.status, &run.answer, run.kind) {
            (RunStatus::Done, Some(_), Some(kind)) if kind != AnswerKind::None => None,
            (RunStatus::Done, ..) => Some("has no answer to follow up (every model failed)"),
            (RunStatus::Running, ..) => Some("has not finished yet: follow it up once it has"),
            _ => Some("ended without an answer to follow up"),
        };
        if let Some(problem) = problem {
            return Err(RunError::UnusableRun {
                id: run.run_id,
                problem: problem.to_owned(),
            });
        }
        let mut turns = vec![turn(&run)];
        let mut beyond = None;
        let mut parent = run.follow_up_of.clone();
        // Only the prompt and answer of each earlier run, read at once.
        let chain = match parent.clone() {
            Some(id) => self
                .store
                .off_runtime(move |store| store.exchanges(&id, MAX_TURNS))
                .await
                .unwrap_or_default(),
            None => Vec::new(),
        };
        let mut chain = chain.into_iter();
        while parent.take().is_some() {
            if turns.len() >= MAX_TURNS {
                beyond = Some(TOO_LONG);
                break;
            }
            match chain.next() {
                Some(Exchange {
                    prompt,
                    answer: Some(answer),
                    follow_up_of,
                }) => {
                    turns.push(Turn {
                        question: prompt,
                        answer,
                    });
                    parent = follow_up_of;
                }
                _ => beyond = Some(NOT_KEPT),
            }
        }
        let max_bytes = self.runner().loaded.config.limits.max_prompt_bytes;
        Ok((
            Conversation::new(run.run_id.clone(), turns, beyond, max_bytes),
            run,
        ))
    }
}

fn turn(run: &StoredRun) -> Turn {
    Turn {
        question: run.prompt.clone(),
        answer: run.answer.clone().unwrap_or_default(),
    }
}
