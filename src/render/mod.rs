//! The texts users read, rendered from model data alone: no I/O, no `Conference`. The engine
//! gathers what a page shows (the state, the attempts, what git says of a commit) and records
//! what these functions return; the snapshot tests (`tests/e2e/snapshots_of_texts.rs`) pin the
//! result.
//!
//! - `cost`: what each kept attempt and validated finding cost;
//! - `importance`: which change mattered (the report's tables);
//! - `format`: how numbers, gains and changes are written everywhere;
//! - `poster`: a round's poster session page;
//! - `prompt`: the prompt a researcher agent reads;
//! - `reasons`: why attempts failed, grouped and worded;
//! - `report`: the end of a conference, `final_report.md` and `synthesis.md`;
//! - `plot`: the progress chart (`conference_progress.png`);
//! - `review`: a round's peer review page;
//! - `status`: the tables of `git conference status`;
//! - `transfer`: a round's knowledge transfer page;
//! - `tree`: the tree of ideas: the prompt's branches, `log --graph`, the path to best;
//! - `tsv`: the results tables.

pub mod cost;
pub mod format;
pub mod importance;
pub mod plot;
pub mod poster;
pub mod prompt;
pub mod reasons;
pub mod report;
pub mod review;
pub mod status;
pub mod sweep;
pub mod talk;
pub mod transfer;
pub mod tree;
pub mod tsv;
