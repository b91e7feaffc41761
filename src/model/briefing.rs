//! What a researcher's prompt is made of (DESIGN.md §5), as plain data: what conference.md asks
//! of the researcher (`Assignment`), where it stands, the guidance and answers people gave, and
//! the past (`Briefing`: its own attempts, the others' failures, peer review). The engine gathers
//! these (`engine::agent::briefing`, `engine::agent::prompt`) and `render::prompt` writes the text from them
//! alone, so the prompt an agent reads is a pure function of this data.

use crate::model::talk::{GuidanceNote, OpenQuestion};
use crate::model::{Direction, ReviewVerdict, Verdict, Word};

/// Everything one prompt shows.
pub struct PromptContext<'a> {
    pub assignment: &'a Assignment,
    pub researcher: &'a str,
    pub round: u32,
    pub iteration: u32,
    pub best_metric: Option<f64>,
    pub conference_best: Option<f64>,
    pub shared_knowledge: &'a [String],
    /// The past: reviews, its own attempts, the others' failures this round.
    pub briefing: &'a Briefing,
    pub stuck_level: u8,
    /// Stopped at stuck level 3 last round and starts again now.
    pub respawned: bool,
    pub endgame: bool,
    pub devils_advocate: bool,
    /// Every frozen pattern, the files the evaluation commands name included.
    pub frozen: &'a [String],
    /// The Goal's brief (`- brief: program.md`), already within its budget.
    pub brief: Option<&'a Brief>,
    /// Guidance people gave (`git conference steer`), oldest first.
    pub guidance: &'a [GuidanceNote],
    /// Every question asked so far (the answered ones go to the prompt).
    pub questions: &'a [OpenQuestion],
    /// Human-in-the-loop mode: a blocking question pauses the conference.
    pub human_in_the_loop: bool,
    /// What earlier conferences on this repository learned (`knowledge.briefed`), within
    /// `model::knowledge::BRIEF_TOKENS`.
    pub knowledge_brief: Option<&'a str>,
    /// With branching on: the node this attempt starts from and the alive branches.
    pub tree: Option<&'a super::tree::TreeBrief>,
    /// `Parameter sweep: on`: the prompt says how to ask for a sweep.
    pub sweep: bool,
}

/// What conference.md asks of a researcher, as its prompt shows it (`engine::agent::prompt` takes it
/// from the configuration).
#[derive(Debug, Clone, PartialEq)]
pub struct Assignment {
    pub title: String,
    pub goal: String,
    pub iterations_per_round: u32,
    /// Metric mode: the metric, its direction and its target.
    pub metric: Option<MetricGoal>,
    /// Qualitative mode: the success criteria.
    pub criteria: Option<String>,
    /// `## Current Approach` and `## Context & References` as written (empty or the template's
    /// placeholder when the user left them).
    pub current_approach: String,
    pub context: String,
    pub focus: Focus,
    /// The Search Space's allowed and forbidden changes, verbatim.
    pub allowed: Vec<String>,
    pub forbidden: Vec<String>,
    /// `## Environment`'s shared paths (read-only, linked from the user's working tree).
    pub shared_paths: Vec<String>,
    /// The Guard's conditions.
    pub guard: Vec<String>,
    /// The evaluation command.
    pub evaluation_command: String,
}

/// The metric a conference in metric mode improves.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricGoal {
    pub name: String,
    pub direction: Direction,
    pub target: Option<f64>,
}

/// Where in the search space a researcher looks.
#[derive(Debug, Clone, PartialEq)]
pub enum Focus {
    /// Free partitioning: everywhere.
    Whole,
    /// Assigned partitioning: its `### Researcher X Focus` (None when conference.md has none).
    Assigned(Option<String>),
}

/// The Goal's brief as a prompt shows it: the file's path and its text, already cut to its
/// budget (with a line saying how much was left out).
#[derive(Debug, Clone, PartialEq)]
pub struct Brief {
    pub path: String,
    pub text: String,
}

/// The past, as the prompt tells it.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Briefing {
    /// The researcher's own attempts, newest first.
    pub own: Vec<Tried>,
    /// Other researchers' attempts of this round that were not kept, newest first.
    pub others: Vec<Tried>,
    /// Peer-review verdicts of earlier rounds, newest first.
    pub reviews: Vec<Reviewed>,
    /// Lower metric is better.
    pub minimize: bool,
}

/// One attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct Tried {
    pub researcher: String,
    pub round: u32,
    pub iteration: u32,
    pub verdict: Word<Verdict>,
    pub metric: Option<f64>,
    /// Metric minus the researcher's best when it was tried.
    pub delta: Option<f64>,
    pub description: String,
    pub reason: Option<String>,
    /// The last lines a crashed or timed-out run printed (when its log is on this machine).
    pub output: Vec<String>,
}

/// One researcher's round-best as peer review judged it.
#[derive(Debug, Clone, PartialEq)]
pub struct Reviewed {
    pub round: u32,
    pub researcher: String,
    pub description: String,
    pub verdict: Word<ReviewVerdict>,
    /// Reproduced gain (positive: better).
    pub gain: f64,
    pub reasoning: String,
    /// What knowledge transfer made of it (`on best`, `not combined: …`).
    pub outcome: Option<String>,
}
