//! `__man DIR`: writes the man pages from the same clap definitions as `-h` (used to refresh
//! the committed man/ folder; a test checks that it is up to date).

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, CommandFactory};

#[derive(Args, Debug)]
pub struct ManArgs {
    /// Folder to write git-conference.1 and git-conference-<command>.1 into.
    pub dir: PathBuf,
}

/// Renders every man page: (file name, contents).
pub fn render_all() -> Result<Vec<(String, Vec<u8>)>> {
    let cmd = super::Cli::command().name("git-conference");
    let mut pages = Vec::new();
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd.clone()).render(&mut buf)?;
    pages.push(("git-conference.1".to_string(), buf));
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("git-conference-{}", sub.get_name());
        let mut buf = Vec::new();
        clap_mangen::Man::new(sub.clone().name(&*Box::leak(name.clone().into_boxed_str())))
            .render(&mut buf)?;
        pages.push((format!("{name}.1"), buf));
    }
    Ok(pages)
}

pub fn run(args: ManArgs) -> Result<i32> {
    std::fs::create_dir_all(&args.dir)?;
    for (name, bytes) in render_all()? {
        std::fs::write(args.dir.join(name), bytes)?;
    }
    Ok(0)
}
