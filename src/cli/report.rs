//! `report`: writes the synthesis, final report, progress plot, every phase's file and the
//! results table to a folder. A completed conference's stored report is written as recorded; a
//! running or paused one gets a fresh report built from its current state.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::engine::phases::synthesis;
use crate::engine::state::{files, Phase};
use crate::engine::Conference;

/// Write the synthesis, final report, progress plot, posters, reviews and results to a folder.
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Conference name (default: the only conference of the repository).
    pub name: Option<String>,
    /// Output folder (default: conference-<name>-report in the current folder).
    #[arg(long, short)]
    pub output: Option<PathBuf>,
}

pub fn run(args: ReportArgs) -> Result<i32> {
    let repo = super::discover()?;
    let name = super::resolve_name(&repo, args.name)?;
    let out = args
        .output
        .unwrap_or_else(|| PathBuf::from(format!("conference-{name}-report")));
    let written = write(&repo, &name, &out)?;
    crate::outln!("Report of `{name}` written to {}:", out.display());
    for w in written {
        crate::outln!("  {w}");
    }
    Ok(0)
}

/// Writes the report files of conference `name` into `out`; returns the file names.
pub fn write(repo: &git2::Repository, name: &str, out: &std::path::Path) -> Result<Vec<String>> {
    let conf = Conference::view(repo.path(), name)?;
    let st = conf.state();
    std::fs::create_dir_all(out)?;
    let mut written = Vec::new();
    let generated = if st.phase == Phase::Done {
        None
    } else {
        Some(synthesis::build(&conf, &st)?)
    };
    for path in [files::SYNTHESIS, files::FINAL_REPORT, files::PLOT] {
        let bytes = match &generated {
            Some(g) => g.iter().find(|(p, _)| p == path).map(|(_, b)| b.clone()),
            None => conf.read_state_file(path)?,
        };
        if let Some(bytes) = bytes {
            std::fs::write(out.join(path), bytes)?;
            written.push(path.to_string());
        }
    }
    if let Some(text) = conf.read_state_file(files::CONFIG)? {
        std::fs::write(out.join(files::CONFIG), text)?;
        written.push(files::CONFIG.into());
    }
    for round in 1..=st.round {
        for path in [
            files::poster(round),
            files::review(round),
            files::transfer(round),
        ] {
            if let Some(bytes) = conf.read_state_file(&path)? {
                let file = path.rsplit('/').next().unwrap_or(&path).to_string();
                std::fs::write(out.join(&file), bytes)?;
                written.push(file);
            }
        }
    }
    std::fs::write(
        out.join("conference_results.tsv"),
        crate::engine::record::tables::conference_results_tsv(&conf, &st)?,
    )?;
    written.push("conference_results.tsv".into());
    let (events, _) = crate::engine::commands::log::read_all(repo, conf.name())?;
    let mut jsonl = String::new();
    for e in events {
        jsonl.push_str(&serde_json::to_string(&e.event)?);
        jsonl.push('\n');
    }
    std::fs::write(out.join("conference_events.jsonl"), jsonl)?;
    written.push("conference_events.jsonl".into());
    Ok(written)
}
