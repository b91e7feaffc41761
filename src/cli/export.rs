//! `export mlflow`: a conference sent to an MLflow tracking server after the fact (one that ran
//! without `- mlflow:`, or whose sends a down server left behind). `engine::commands::tracking` does the
//! work; this reads the arguments and says what was made.

use anyhow::Result;
use clap::{Args, Subcommand};

/// Send a conference to an experiment tracker.
#[derive(Args, Debug)]
pub struct ExportArgs {
    #[command(subcommand)]
    pub to: To,
}

#[derive(Subcommand, Debug)]
pub enum To {
    Mlflow(MlflowArgs),
}

/// Send a conference to an MLflow tracking server: the conference as a parent run, each attempt a
/// child run (params: the literals it changed and the files it touched; metrics: the metric, its
/// sub-metrics and its readings by step; tags: its commit, its parent attempt's commit and run,
/// researcher, round, verdict, review and transfer verdicts; its diff as an artifact when small).
///
/// Idempotent: an attempt's run is found by its commit tag before one is made, so exporting again
/// (from this clone or a fresh one) adds nothing twice, and sends only what is missing.
#[derive(Args, Debug)]
pub struct MlflowArgs {
    /// Conference name (default: the only conference of the repository).
    pub name: Option<String>,
    /// The tracking server (default: the conference's `- mlflow:`, else $MLFLOW_TRACKING_URI).
    #[arg(long, value_name = "URL")]
    pub uri: Option<String>,
    /// The experiment (default: the conference's `- mlflow experiment:`, else its name).
    #[arg(long, value_name = "NAME")]
    pub experiment: Option<String>,
}

pub fn run(args: ExportArgs) -> Result<i32> {
    let To::Mlflow(args) = args.to;
    let repo = super::discover()?;
    let name = super::resolve_name_for(&repo, args.name, "export mlflow")?;
    let e = crate::engine::commands::tracking::export(
        repo.commondir(),
        &name,
        args.uri,
        args.experiment,
    )?;
    let s = e.sent;
    // `completed` counts the runs made and those a killed sender had left RUNNING.
    let resumed = s.completed.saturating_sub(s.made);
    crate::outln!(
        "Exported `{name}` to MLflow at {}, experiment `{}` (id {}): {} attempt run{} made, {} already there{}",
        e.uri,
        e.experiment,
        e.experiment_id,
        s.made,
        if s.made == 1 { "" } else { "s" },
        s.already,
        if resumed > 0 {
            format!(", {resumed} left unfinished by an earlier send completed")
        } else {
            String::new()
        }
    );
    if let Some(run) = &e.conference_run {
        crate::outln!(
            "The conference's run: {}/#/experiments/{}/runs/{run}",
            e.uri,
            e.experiment_id
        );
    }
    for why in &e.refused {
        crate::errln!("git-conference: MLflow refused {why}; it is left out");
    }
    Ok(if e.refused.is_empty() { 0 } else { 1 })
}
