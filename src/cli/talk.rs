//! `steer`, `answer`, `stop` and `approve`: what a person says to a conference, running or not.
//! Each calls its one engine function (`engine::phases::talk`), which the page calls too.

use anyhow::Result;
use clap::Args;

use crate::engine::phases::talk::{self, Delivery};

/// Give every researcher guidance: recorded as a `conference.guidance` event, it is in each
/// researcher's next prompt (the newest 5 pieces, newest first), in `status` and in the final
/// report. Works while the conference runs (the running process records it within a second)
/// and while it does not (recorded at once).
#[derive(Args, Debug)]
pub struct SteerArgs {
    /// Conference name.
    pub name: String,
    /// The guidance, e.g. "try a cosine schedule".
    pub text: String,
}

/// Answer an agent's question (`Q1`, `Q2`, … as `status` lists them): recorded as a
/// `question.answered` event, the answer is in the researchers' prompts from their next
/// iteration. In human-in-the-loop mode it releases a conference paused on a blocking question
/// (then `resume`).
#[derive(Args, Debug)]
pub struct AnswerArgs {
    /// Conference name.
    pub name: String,
    /// The question's id, e.g. Q3.
    pub question: String,
    /// The answer.
    pub text: String,
}

/// Stop a running conference gracefully: the attempts running finish and are recorded, then
/// it pauses (the running `start`/`resume` exits with code 3, as a pause does); `git
/// conference resume NAME` continues it. Recorded as `conference.stop_requested`, then
/// `conference.paused`.
#[derive(Args, Debug)]
pub struct StopArgs {
    /// Conference name.
    pub name: String,
}

/// Human-in-the-loop mode: approve the round's candidates for best (validated by peer review),
/// which knowledge transfer then merges onto the best branch; `--drop A` leaves researcher A's
/// finding out. Recorded as `transfer.approved`; then `git conference resume NAME`.
#[derive(Args, Debug)]
pub struct ApproveArgs {
    /// Conference name.
    pub name: String,
    /// A researcher (A, B, …) whose finding stays off best; repeat for several.
    #[arg(long = "drop", value_name = "RESEARCHER")]
    pub drop: Vec<String>,
}

fn said(delivery: Result<Delivery>, what: &str, name: &str) -> Result<i32> {
    crate::outln!("{}", delivery?.describe(what, name));
    Ok(0)
}

pub fn steer(args: SteerArgs) -> Result<i32> {
    let repo = super::discover()?;
    let name = super::resolve_name_for(&repo, Some(args.name), "steer")?;
    said(
        talk::steer(repo.path(), &name, &args.text),
        "guidance",
        &name,
    )
}

pub fn answer(args: AnswerArgs) -> Result<i32> {
    let repo = super::discover()?;
    let name = super::resolve_name_for(&repo, Some(args.name), "answer")?;
    let what = format!("answer to {}", args.question.trim().to_uppercase());
    said(
        talk::answer(repo.path(), &name, &args.question, &args.text),
        &what,
        &name,
    )
}

pub fn stop(args: StopArgs) -> Result<i32> {
    let repo = super::discover()?;
    let name = super::resolve_name_for(&repo, Some(args.name), "stop")?;
    let what = "stop (after the running attempts; continue with `git conference resume`)";
    said(talk::stop(repo.path(), &name), what, &name)
}

pub fn approve(args: ApproveArgs) -> Result<i32> {
    let repo = super::discover()?;
    let name = super::resolve_name_for(&repo, Some(args.name), "approve")?;
    let what = format!(
        "approval{} (continue with `git conference resume {name}`)",
        if args.drop.is_empty() {
            String::new()
        } else {
            format!(" without {}", args.drop.join(", "))
        }
    );
    said(talk::approve(repo.path(), &name, &args.drop), &what, &name)
}
