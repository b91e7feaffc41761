//! `list`: the conferences of this repository and their state.

use anyhow::Result;
use clap::Args;

use crate::engine::Conference;
use crate::render::format::fmt;

/// List the conferences in this repository and their state.
#[derive(Args, Debug)]
pub struct ListArgs {}

pub fn run(_: ListArgs) -> Result<i32> {
    let repo = super::discover()?;
    let names = super::conference_names(&repo)?;
    if names.is_empty() {
        crate::outln!("No conference in this repository. Start one with `git conference init` and `git conference start`.");
        return Ok(0);
    }
    for name in names {
        match Conference::view(repo.path(), &name) {
            Ok(conf) => {
                let st = conf.state();
                let runner = crate::lock::runner(conf.run_dir());
                crate::outln!(
                    "{name}\t{}\tround {}\tbest {}\t{}",
                    st.final_status
                        .clone()
                        .unwrap_or_else(|| crate::lock::shown_status(
                            &st.status,
                            runner.as_deref()
                        )),
                    st.round,
                    fmt(st.best.metric),
                    conf.config().title
                );
            }
            Err(e) => crate::outln!("{name}\tunreadable: {e:#}"),
        }
    }
    Ok(0)
}
