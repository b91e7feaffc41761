//! The agent's part of an iteration: its run with the prompt, what it broke in git put back,
//! how it ended turned into the attempt's description or failure, and a worktree it removed
//! made again.

use std::time::Instant;

use anyhow::Result;
use git2::{Oid, Repository};

use super::parked::{open_worktree, settle, start_watch, take_changes};
use super::record::{failed_eval, record_iteration};
use super::*;
use crate::agents::call::{AgentCall, AgentOutcome};
use crate::engine::agent::{dispatch, windows};
use crate::engine::record::attempt::Attempt;
use crate::engine::state::{ResearcherState, State};
use crate::engine::Conference;
use crate::git::snapshot;
use crate::git::watch::{Changes, Watch};
use crate::model::Verdict;

impl<'a> Session<'a> {
    /// Runs the agent with its prompt, then puts back what it broke in git (config first,
    /// before a worktree is made again).
    pub(super) async fn run_agent(
        &mut self,
        st: &State,
        r: &ResearcherState,
        iteration: u32,
        head_tree: Oid,
        env: &[(String, String)],
    ) -> Result<AgentRan> {
        let (conf, id) = (self.conf, self.id);
        let foreign = self.foreign_writes(head_tree)?;
        let prompt = self.prompt(st, r, iteration)?;
        let refs_before = crate::git::traces::read(self.repo.commondir());
        crate::engine::agent::integrity::ConfigGuard::take(&self.repo, &conf.run_dir);
        let shared_before = crate::engine::agent::workspace::SharedState::read(conf);
        let agent_timeout = conf.config.agent.timeout;
        let call = AgentCall {
            researcher: id,
            round: st.round,
            iteration,
            worktree: &self.wt_path,
            prompt: &prompt,
            timeout: Some(
                self.remaining()
                    .map_or(agent_timeout, |r| r.min(agent_timeout)),
            ),
            env: env.to_vec(),
            head_tree,
            attempts: r.attempts,
        };
        let user_before = crate::git::user_writes::read(&conf.repo_dir);
        let began = Instant::now();
        windows::began(id);
        let run = dispatch::run(conf, call).await;
        windows::ended(id);
        let run = run?;
        let seconds = began.elapsed().as_secs_f64();
        let commondir = self.repo.commondir();
        for warning in crate::git::traces::undo_agents_changes(&refs_before, commondir) {
            conf.ui.warn(&warning);
        }
        Ok(AgentRan {
            remark: self.user_writes(&user_before, began),
            foreign,
            usage: run.usage(),
            seconds,
            outcome: run.outcome,
            report: run.report,
            batch: run.batch,
            damage: crate::engine::agent::integrity::repair_after_agent(conf),
            shared_before,
        })
    }

    /// What reached this researcher's worktree since its last attempt was put back, while its
    /// own agent was not running (another researcher's agent writing there by its path): the
    /// paths the watch saw, for the attempt's capture, and the reason that rejects the attempt,
    /// naming the researchers whose agents ran meanwhile. None when nothing differs from the
    /// head. Without a watch (no inotify, or none left: a user has 128) the worktree is scanned.
    fn foreign_writes(&mut self, head_tree: Oid) -> Result<Option<(Changes, String)>> {
        let seen = take_changes(&mut self.watch);
        let snap = match &seen {
            Changes::Paths(paths) if paths.is_empty() => return Ok(None),
            Changes::Paths(paths) => snapshot::capture_paths(&self.wt, paths)?,
            Changes::Everything => snapshot::capture(&self.wt)?,
        };
        // The capture refreshed the index: that is no change of the agent's.
        settle(&mut self.watch);
        let changed = snapshot::changed_paths(&self.repo, head_tree, snap.tree)?;
        if changed.is_empty() {
            return Ok(None);
        }
        let named = crate::git::user_writes::named(&changed);
        let others = windows::others_since_own_last(self.id);
        let who = windows::who(&others);
        self.conf.ui.warn(&format!(
            "warning: researcher {}'s worktree was written into while its agent was not running \
             ({named}), by {who}; its next attempt is rejected",
            self.id
        ));
        let why = format!(
            "{who} wrote into this worktree ({named}) while researcher {}'s agent was not running: not its work",
            self.id
        );
        Ok(Some((seen, why)))
    }

    /// What reached the user's working tree while the agent ran, reported on the log (the
    /// researchers whose agents ran at the same time named too) and returned as the attempt's
    /// remark. Never undone (see `git::user_writes`).
    fn user_writes(
        &self,
        before: &crate::git::user_writes::UserTree,
        began: Instant,
    ) -> Option<String> {
        let paths = crate::git::user_writes::changed_since(before, &self.conf.repo_dir);
        if paths.is_empty() {
            return None;
        }
        let named = crate::git::user_writes::named(&paths);
        let others = windows::others_since(self.id, began);
        let (line, remark) = if others.is_empty() {
            (
                format!(
                    "researcher {}'s agent changed your working tree ({named})",
                    self.id
                ),
                format!("changed your working tree ({named}), not undone"),
            )
        } else {
            let too = format!("{} ran too", windows::who(&others));
            (
                format!(
                    "your working tree changed while researcher {}'s agent ran ({named}; {too})",
                    self.id
                ),
                format!(
                    "your working tree changed while this agent ran ({named}; {too}), not undone"
                ),
            )
        };
        self.conf.ui.warn(&format!(
            "warning: {line}; not undone (if you were editing them, that was you)"
        ));
        Some(remark)
    }

    /// An agent that removed its worktree: it is made again and the attempt recorded as
    /// rejected (then the loop goes on, or the round ends when setup fails there). A worktree
    /// whose link was broken is linked again, and that is part of the attempt's reason.
    pub(super) async fn worktree_lost(
        &mut self,
        ran: &mut AgentRan,
        st: &State,
        r: &ResearcherState,
        iteration: u32,
        head_tree: Oid,
    ) -> Result<Option<Next>> {
        use crate::engine::agent::integrity::WorktreeDamage;
        match crate::engine::agent::integrity::worktree_damage(&self.wt, &self.wt_path) {
            Some(WorktreeDamage::Lost(why)) => {
                let why = with_damage(why, ran.damage.as_deref());
                self.watch = None;
                let from = self.start_node(st, r);
                let base = from.as_ref().map_or(&r.head, |n| &n.commit).clone();
                let attempt = Attempt {
                    id: self.id,
                    iteration,
                    tree: head_tree,
                    head: &base,
                    description: "worktree removed",
                    usage: ran.usage,
                    agent_s: Some(ran.seconds),
                    questions: vec![],
                    remark: ran.remark.as_deref(),
                    branch: from.map(|from| crate::engine::record::attempt::AttemptBranch {
                        from,
                        request: None,
                    }),
                    sweep: None,
                    sweep_warning: None,
                };
                let wt_path = self.wt_path.clone();
                let made = remake_worktree(self.conf, &attempt, &r.head, st.round, &wt_path, why);
                match made.await? {
                    Err(setup_failed) => return Ok(Some(Next::Finish(setup_failed))),
                    Ok((wt, watch)) => (self.wt, self.watch) = (wt, watch),
                }
                self.at = r.head.clone();
                Ok(Some(Next::Continue))
            }
            Some(WorktreeDamage::Relinked(why)) => {
                ran.damage = Some(with_damage(why, ran.damage.as_deref()));
                Ok(None)
            }
            None => Ok(None),
        }
    }
}

/// How the agent run ended, as the attempt's description (what the agent said it did) and its
/// failure (verdict and reason; a failed run that also broke git says both). Err: the loop's
/// next step instead (Ctrl-C, or the agent's quota is exhausted).
#[allow(clippy::type_complexity)]
pub(super) fn agent_result(
    outcome: AgentOutcome,
    damage: &Option<String>,
) -> std::result::Result<(Option<String>, Option<(Verdict, String)>), Next> {
    let (description, failure) = match outcome {
        AgentOutcome::Interrupted => return Err(Next::Stop),
        AgentOutcome::Exhausted => return Err(Next::Finish("exhausted".into())),
        AgentOutcome::Done(note) => (note, None),
        AgentOutcome::Crashed(why) => (None, Some((Verdict::Crashed, why))),
        AgentOutcome::Unapplied { verdict, reason } => (None, Some((verdict, reason))),
        AgentOutcome::TimedOut => (
            None,
            Some((
                Verdict::Timeout,
                "agent ran past the researcher timeout".to_string(),
            )),
        ),
    };
    let failure = failure.map(|(kind, why)| (kind, with_damage(why, damage.as_deref())));
    Ok((description, failure))
}

/// The agent's note less its `QUESTION: …` lines, and those questions.
pub(super) fn split_note(note: Option<String>) -> (Option<String>, Vec<crate::model::talk::Asked>) {
    match note {
        Some(note) => {
            let (text, asked) = crate::model::talk::split_questions(&note);
            ((!text.is_empty()).then_some(text), asked)
        }
        None => (None, Vec::new()),
    }
}

/// The note less its last `BRANCH:` line, and what that line asked (branching on).
pub(super) fn split_branch(
    note: Option<String>,
) -> (Option<String>, Option<crate::model::tree::BranchRequest>) {
    match note {
        Some(note) => {
            let (text, request) = crate::model::tree::split_branch(&note);
            ((!text.is_empty()).then_some(text), request)
        }
        None => (None, None),
    }
}

/// `why`, followed by what the agent broke in git when it did.
pub(super) fn with_damage(why: String, damage: Option<&str>) -> String {
    match damage {
        Some(d) => format!("{why}; {d}"),
        None => why,
    }
}

/// An agent removed its worktree: it is made again from the researcher's branch (and set up),
/// and the attempt recorded as rejected with `why`. Returns the new handle and watch, or why
/// setup failed.
pub(super) async fn remake_worktree(
    conf: &Conference,
    attempt: &Attempt<'_>,
    head: &crate::model::CommitId,
    round: u32,
    wt_path: &std::path::Path,
    why: String,
) -> Result<std::result::Result<(Repository, Option<Watch>), String>> {
    let id = attempt.id;
    let branch = conf.refs.researcher_branch(id);
    conf.prepare_worktree(&researcher_label(id), Some(&branch), head)?;
    if let Some(failed) =
        crate::engine::agent::workspace::ready_researcher(conf, id, wt_path).await?
    {
        return Ok(Err(failed));
    }
    let wt = open_worktree(conf, wt_path)?;
    let watch = start_watch(&wt, wt_path);
    let failed = failed_eval(Verdict::Rejected.as_str(), &why);
    record_iteration(
        conf,
        attempt,
        None,
        Measured::not(&failed),
        Verdict::Rejected,
        Some(why),
    )?;
    conf.ui.info(&format!(
        "  {id} r{round} i{}: rejected  worktree removed",
        attempt.iteration
    ));
    Ok(Ok((wt, watch)))
}
