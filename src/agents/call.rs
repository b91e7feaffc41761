//! What one run of a researcher's agent takes and returns, whichever agent it is (a shell
//! command, `builtin:tune`, `builtin:openai`): the types live here, below both the dispatcher
//! (`crate::engine::agent::dispatch`) and the built-in HTTP agent (`crate::researchers::openai`), so that neither imports the
//! other for them.

use std::path::Path;
use std::time::Duration;

use git2::Oid;

use crate::agents::{self, AgentReport};

/// How the creative step ended.
pub enum AgentOutcome {
    /// It edited (or not) and exited 0; the description it wrote, if any.
    Done(Option<String>),
    /// Non-zero exit or signal.
    Crashed(String),
    TimedOut,
    Interrupted,
    /// The built-in tuner has nothing left to try.
    Exhausted,
    /// The agent's answer was not applied: the attempt is recorded with this verdict
    /// (`rejected`, `no_change`) and reason.
    Unapplied {
        verdict: crate::model::Verdict,
        reason: String,
    },
}

/// How the creative step ended, and what the agent reported of its run: a known CLI's output
/// read back (usage with its cost, errors, refused edits), or builtin:openai's own token count.
pub struct AgentRun {
    pub outcome: AgentOutcome,
    pub report: AgentReport,
    /// `builtin:tune` with `- sweep: q`: the q points it proposed (the worktree holds the first).
    pub batch: Option<crate::model::sweep::BatchRequest>,
}

impl AgentRun {
    /// The run's usage for the ledger.
    pub fn usage(&self) -> Option<agents::Usage> {
        self.report.usage
    }
}

impl From<AgentOutcome> for AgentRun {
    fn from(outcome: AgentOutcome) -> Self {
        AgentRun {
            outcome,
            report: AgentReport::default(),
            batch: None,
        }
    }
}

pub struct AgentCall<'a> {
    pub researcher: &'a str,
    pub round: u32,
    pub iteration: u32,
    pub worktree: &'a Path,
    pub prompt: &'a str,
    pub timeout: Option<Duration>,
    pub env: Vec<(String, String)>,
    /// Tuner only: the researcher's kept tree, and its attempt count (the tuner derives
    /// everything it needs from the recorded attempts instead).
    pub head_tree: Oid,
    pub attempts: u64,
}
