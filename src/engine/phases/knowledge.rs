//! Knowledge across conferences (DESIGN.md §10, seed 003's learning layer), the engine's two
//! ends of it:
//!
//! - before round 1, the brief: the store's entries most relevant to this conference
//!   (`model::knowledge::brief`) are recorded as a `knowledge.briefed` event, so every prompt
//!   of the conference carries the same brief, and `status` and the final report name it;
//! - once the conference is done, the retrospective: its patterns (validated findings that
//!   knowledge transfer put on best, with the gain review measured) and its errors (the most
//!   frequent kinds of failure: rejected, crashed, timed out, overturned in review, left out in
//!   transfer) are computed from the recorded data and stored in one commit on the knowledge
//!   ref. The store is the commit point: a run killed before it stores, and the next `resume`
//!   (or the next end) stores it; one whose commit is there is never stored twice.
//!
//! An optional `- retrospective:` command (Agent section) reads each entry's text on stdin and
//! what it prints becomes the entry's prose; it never changes the entry's data.

use anyhow::Result;
use git2::Repository;

use crate::engine::record::ledger::{all_attempts, read_findings, read_picks};
use crate::engine::{reasons, Conference};
use crate::exec::process::{self, Outcome, Spec};
use crate::model::event::{Event, KnowledgeBriefed};
use crate::model::knowledge::{self, Entry, Kind, Wanted};
use crate::model::state::State;
use crate::model::{AttemptRecord, CommitId, Finding, PickResult, ReviewVerdict};
use crate::store::knowledge::{self as store, Added};

/// Error kinds a retrospective keeps: the most frequent ones, not every failure.
pub const ERRORS_KEPT: usize = 5;

/// What this conference looks for in the store: its goal, metric and allowed changes.
pub fn wanted(conf: &Conference) -> Wanted {
    Wanted::new(
        &conf.name,
        &conf.config.goal,
        &crate::engine::measure::evaluate::metric_name(&conf.config),
        &conf.config.allowed,
    )
}

/// Records `knowledge.briefed` when the store holds entries relevant to this conference (once,
/// before round 1). A store that cannot be read costs a warning, never the conference.
pub fn record_brief(conf: &Conference) -> Result<()> {
    let repo = conf.open_repo()?;
    let entries = match store::read(&repo) {
        Ok(s) => {
            warn_problems(conf, &s.problems);
            s.entries
        }
        Err(e) => {
            conf.ui.warn(&format!(
                "warning: the knowledge store cannot be read ({e:#}); no brief"
            ));
            return Ok(());
        }
    };
    let Some(brief) = knowledge::brief(&entries, &wanted(conf)) else {
        return Ok(());
    };
    let summary = format!("briefed with {}", brief.ids.join(", "));
    conf.record(
        Event::KnowledgeBriefed(KnowledgeBriefed {
            tokens: knowledge::tokens(&brief.text),
            entries: brief.ids,
            text: brief.text,
        }),
        &summary,
        vec![],
    )?;
    conf.ui.info(&format!("knowledge: {summary}"));
    Ok(())
}

/// Says each malformed entry (file and line); they are left out, the rest is used.
pub fn warn_problems(conf: &Conference, problems: &[String]) {
    for p in problems {
        conf.ui.warn(&format!(
            "warning: knowledge store ({}): {p}",
            crate::store::refs::KNOWLEDGE_REF
        ));
    }
}

/// The retrospective's key in the store: the conference (a name used again after `clean
/// --all` is another conference: its start time tells) and where it ended (a conference that is
/// continued and ends again has a retrospective of each end).
pub fn retrospective_key(st: &State) -> String {
    format!(
        "{} round {} iterations {} started {}",
        st.name, st.round, st.total_iterations, st.started_at
    )
}

/// Whether the retrospective of the conference's end is in the store.
pub fn retrospective_stored(repo: &Repository, st: &State) -> bool {
    crate::store::cas::read(repo, crate::store::refs::KNOWLEDGE_REF)
        .and_then(|tip| store::has_retrospective(repo, tip, &retrospective_key(st)))
        .unwrap_or(false)
}

/// [`store_retrospective`], whose failure costs a warning (the conference itself is done; the
/// next `resume` stores it), never the run's result.
pub async fn store_retrospective_or_warn(conf: &Conference, prose: bool) {
    if let Err(e) = store_retrospective(conf, prose).await {
        conf.ui.warn(&format!(
            "warning: the retrospective of `{}` was not stored in the knowledge store ({e:#}); `git conference resume {}` stores it",
            conf.name, conf.name
        ));
    }
}

/// Stores the retrospective of a finished conference unless the store holds it. `prose`: run
/// the retrospective command (only where this clone trusts the conference's commands).
pub async fn store_retrospective(conf: &Conference, prose: bool) -> Result<()> {
    let st = conf.state();
    let repo = conf.open_repo()?;
    if retrospective_stored(&repo, &st) {
        return Ok(());
    }
    let mut entries = entries(conf, &repo, &st)?;
    if prose {
        if let Some(command) = &conf.config.agent.retrospective {
            for e in &mut entries {
                e.prose = entry_prose(conf, command, e).await;
            }
        }
    }
    crate::failpoint::hit("retrospective.computed");
    let subject = format!(
        "retrospective: {} ({}, {} rounds)",
        conf.name,
        st.final_status.as_deref().unwrap_or("done"),
        st.round
    );
    match store::add_retrospective(&repo, &entries, &subject, &retrospective_key(&st))? {
        Added::Stored(ids) if !ids.is_empty() => conf.ui.info(&format!(
            "knowledge: the retrospective added {} ({}; `git conference knowledge list`)",
            ids.join(", "),
            crate::store::refs::KNOWLEDGE_REF
        )),
        _ => {}
    }
    Ok(())
}

/// The retrospective's entries: the patterns, then the errors.
fn entries(conf: &Conference, repo: &Repository, st: &State) -> Result<Vec<Entry>> {
    let attempts = all_attempts(conf, st)?;
    let mut out = Vec::new();
    let mut failures = failures(repo, &attempts);
    for round in 1..=st.round {
        let findings = read_findings(conf, round);
        let picks = read_picks(conf, round);
        for f in &findings {
            let pick = picks.iter().find(|p| p.finding == f.commit);
            if f.verdict == ReviewVerdict::Validated
                && pick.is_some_and(|p| p.result == PickResult::Merged)
            {
                out.push(pattern(conf, round, f));
            }
            if f.verdict == ReviewVerdict::Overturned {
                count_failure(&mut failures, "overturned in review", round, f);
            }
        }
        for p in picks.iter().filter(|p| p.result == PickResult::Dropped) {
            if let Some(f) = findings.iter().find(|f| f.commit == p.finding) {
                let kind = format!(
                    "left out in knowledge transfer: {}",
                    crate::render::format::one_line(&p.reason, 80)
                );
                count_failure(&mut failures, &kind, round, f);
            }
        }
    }
    failures.sort_by_key(|f| std::cmp::Reverse(f.count));
    for (n, f) in failures.into_iter().take(ERRORS_KEPT).enumerate() {
        out.push(error(conf, n + 1, f));
    }
    Ok(out)
}

/// An entry's fields that come from the conference.
fn base(conf: &Conference, id: String, kind: Kind) -> Entry {
    let mut e = Entry::new(&id, kind, &conf.name);
    e.metric = crate::engine::measure::evaluate::metric_name(&conf.config);
    e.direction = conf
        .config
        .metric
        .as_ref()
        .map(|m| format!("{:?}", m.direction).to_lowercase())
        .unwrap_or_default();
    e.goal = conf
        .config
        .goal
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .to_string();
    e
}

/// A validated finding that knowledge transfer put on best.
fn pattern(conf: &Conference, round: u32, f: &Finding) -> Entry {
    let mut e = base(
        conf,
        format!("{}-r{round}-{}", conf.name, f.researcher),
        Kind::Pattern,
    );
    e.round = Some(round);
    e.researcher = Some(f.researcher.clone());
    e.files = f.files.clone();
    e.change = crate::render::format::one_line(&f.description, 300);
    e.gain = Some(f.gain_reproduced);
    e.commit = Some(f.commit.clone());
    e
}

/// One kind of failure being counted.
struct Failure {
    kind: String,
    /// The evaluation's own error line, from the first attempt of this kind that has one.
    error: Option<String>,
    count: u32,
    example: String,
    change: String,
    files: Vec<String>,
}

/// The attempts' failures by kind (`reasons::kind`), each with its first attempt as example.
fn failures(repo: &Repository, attempts: &[AttemptRecord]) -> Vec<Failure> {
    let mut out: Vec<Failure> = Vec::new();
    for a in attempts
        .iter()
        .filter(|a| crate::model::reasons::shows_reason(&a.verdict))
    {
        let kind = reasons::kind(&a.verdict, a.reason.as_deref());
        let error = a
            .reason
            .as_deref()
            .and_then(crate::model::reasons::error_line_of);
        if let Some(f) = out.iter_mut().find(|f| f.kind == kind) {
            f.count += 1;
            f.error = f.error.take().or(error);
            continue;
        }
        out.push(Failure {
            kind,
            error,
            count: 1,
            example: format!(
                "round {}, researcher {}, iteration {}: {}",
                a.round,
                a.researcher,
                a.iteration,
                crate::render::format::one_line(
                    &crate::model::reasons::reason_text(&a.verdict, a.reason.as_deref()),
                    200
                )
            ),
            change: crate::render::format::one_line(&a.description, 200),
            files: touched(repo, a.commit.as_ref()),
        });
    }
    out
}

/// Counts a finding that failed in review or transfer under `kind`.
fn count_failure(failures: &mut Vec<Failure>, kind: &str, round: u32, f: &Finding) {
    if let Some(known) = failures.iter_mut().find(|k| k.kind == kind) {
        known.count += 1;
        return;
    }
    failures.push(Failure {
        kind: kind.to_string(),
        error: None,
        count: 1,
        example: format!(
            "round {round}, researcher {}: {}",
            f.researcher,
            crate::render::format::one_line(&f.reasoning, 200)
        ),
        change: crate::render::format::one_line(&f.description, 200),
        files: f.files.clone(),
    });
}

/// The n-th most frequent kind of failure.
fn error(conf: &Conference, n: usize, f: Failure) -> Entry {
    let mut e = base(conf, format!("{}-e{n}", conf.name), Kind::Error);
    e.reason = f.kind;
    e.error = f
        .error
        .map(|l| crate::render::format::one_line(&l, 200))
        .unwrap_or_default();
    e.count = Some(f.count);
    e.example = f.example;
    e.change = f.change;
    e.files = f.files;
    e
}

/// The paths an attempt's commit changed (none when nothing was committed).
fn touched(repo: &Repository, commit: Option<&CommitId>) -> Vec<String> {
    let paths = || -> Result<Vec<String>> {
        let Some(commit) = commit else {
            return Ok(vec![]);
        };
        let c = repo.find_commit(commit.oid())?;
        let parent = c.parent(0)?;
        crate::git::snapshot::changed_paths(repo, parent.tree_id(), c.tree_id())
    };
    paths().unwrap_or_default()
}

/// What the retrospective command says of `e` (its text on stdin); a failed run is a line
/// saying so, never a lost entry.
async fn entry_prose(conf: &Conference, command: &str, e: &Entry) -> String {
    let st = conf.state();
    let log = conf.log_path(&format!("retrospective-{}", e.id));
    let mut env = conf.context_env("retrospective", st.round, 0, st.best.metric);
    env.push(("CONFERENCE_ROLE".into(), "retrospective".into()));
    env.push(("CONFERENCE_KNOWLEDGE_ID".into(), e.id.clone()));
    let run = process::run(Spec {
        command,
        cwd: &conf.run_dir,
        env,
        timeout: Some(conf.config.agent.timeout),
        stdout: log.with_extension("out"),
        stderr: log.with_extension("err"),
        stdin: Some(knowledge::render(e).into_bytes()),
    })
    .await;
    let text = process::read_output(&log.with_extension("out"));
    match run {
        Ok(f) if f.outcome == Outcome::Exited(0) => text.trim().to_string(),
        Ok(f) => format!(
            "(The retrospective command `{command}` gave no prose: {}.)",
            f.outcome.describe()
        ),
        Err(e) => format!("(The retrospective command `{command}` could not run: {e}.)"),
    }
}
