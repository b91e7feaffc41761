//! What people say to a running conference, and what it asks them (DESIGN.md §9, §10): the
//! guidance in force (`git conference steer`), the agents' questions and their answers
//! (`QUESTION: …` in a note, `git conference answer`), a stop asked for (`git conference stop`),
//! the human-in-the-loop decisions (`git conference approve`) and what a pause waits for.
//!
//! These are kept in the state (each from its event), so `status`, the reports, the page and
//! the prompts read them from one blob. A question's id (`Q1`, `Q2`, …) is its place in the
//! event log: the reducer numbers questions in the order their events are recorded, so the id
//! is the same after a resume and on every machine.

use serde::{Deserialize, Serialize};

/// Pieces of guidance in force: the newest this many are in every researcher's prompt, and
/// `status` and the page list them; older ones stay in the state and the final report.
pub const GUIDANCE_IN_FORCE: usize = 5;

/// A piece of guidance, as `git conference steer` gave it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuidanceNote {
    pub text: String,
    /// The round the conference was in when it was recorded.
    pub round: u32,
    /// When the person asked for it (the command's clock).
    pub at: String,
}

/// A question an agent asked in its note, and its answer once given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenQuestion {
    /// `Q1`, `Q2`, … in the order the questions were recorded.
    pub id: String,
    pub researcher: String,
    pub round: u32,
    pub iteration: u32,
    pub text: String,
    /// Asked as `QUESTION (blocking): …`: a human-in-the-loop conference waits for its answer.
    #[serde(default)]
    pub blocking: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
}

impl OpenQuestion {
    pub fn is_open(&self) -> bool {
        self.answer.is_none()
    }
}

/// A question as an agent's note asks it (the reducer gives it its id).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Asked {
    pub text: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub blocking: bool,
}

/// The marker a note's line starts with to ask the humans a question.
pub const QUESTION_MARKER: &str = "QUESTION:";
/// The marker of a question a human-in-the-loop conference waits for.
pub const BLOCKING_QUESTION_MARKER: &str = "QUESTION (blocking):";

/// Splits an agent's note into its description and the questions its lines ask (`QUESTION: …`
/// or `QUESTION (blocking): …`, one per line, anywhere in the note; case as written).
pub fn split_questions(note: &str) -> (String, Vec<Asked>) {
    let mut kept = Vec::new();
    let mut asked = Vec::new();
    for line in note.lines() {
        let trimmed = line.trim_start();
        let question = if let Some(q) = trimmed.strip_prefix(BLOCKING_QUESTION_MARKER) {
            Some((q, true))
        } else {
            trimmed.strip_prefix(QUESTION_MARKER).map(|q| (q, false))
        };
        match question {
            Some((q, blocking)) if !q.trim().is_empty() => asked.push(Asked {
                text: q.trim().to_string(),
                blocking,
            }),
            Some(_) => {}
            None => kept.push(line),
        }
    }
    (kept.join("\n").trim().to_string(), asked)
}

/// The decision `git conference approve` recorded for a round's knowledge transfer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Approval {
    pub round: u32,
    /// Researchers whose findings stay off best.
    #[serde(default)]
    pub dropped: Vec<String>,
}

/// What a pause waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitKind {
    /// `git conference stop` asked for it: `resume` goes on.
    Stop,
    /// Human in the loop: the candidates for best wait for `git conference approve`.
    Approval,
    /// Human in the loop: every researcher is stalled; `steer`, then `resume`.
    Stalled,
    /// Human in the loop: a blocking question waits for `git conference answer`.
    Answer,
}

/// A pause's reason, as its event records it and `status` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Waiting {
    pub kind: WaitKind,
    /// What it waits for, in a sentence with the command to run.
    pub detail: String,
    /// The round it paused in.
    pub round: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_are_taken_out_of_the_note() {
        let (text, asked) = split_questions(
            "lower the learning rate\nQUESTION: may I change the tokenizer?\n  QUESTION (blocking): is eval.sh right?\nQUESTION:   \n",
        );
        assert_eq!(text, "lower the learning rate");
        assert_eq!(
            asked,
            vec![
                Asked {
                    text: "may I change the tokenizer?".into(),
                    blocking: false
                },
                Asked {
                    text: "is eval.sh right?".into(),
                    blocking: true
                }
            ]
        );
        assert_eq!(split_questions("plain"), ("plain".into(), vec![]));
    }
}
