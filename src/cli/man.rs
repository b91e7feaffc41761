//! The manual pages, rendered from the same clap definitions as `-h`. `man --install` puts them
//! where the user's own `man` finds them without sudo (`git conference --help` runs `man
//! git-conference`); `__man DIR` refreshes the committed man/ folder (a test checks that it is up
//! to date).

use std::path::{Path, PathBuf};

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

/// Install the manual pages for your user, no sudo needed: into $XDG_DATA_HOME/man/man1 (or
/// ~/.local/share/man/man1), so that `git conference --help` and `man git-conference` open
/// them. Says where they went, and how to make `man` look there when it does not.
#[derive(Args, Debug)]
pub struct InstallArgs {
    /// Install the pages (without it, only say where they would go).
    #[arg(long)]
    pub install: bool,
    /// Install into DIR/man1 instead of the user's manual folder.
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// The user's manual folder (the one holding man1/): $XDG_DATA_HOME/man, else
/// ~/.local/share/man, which man-db puts on the manual path when ~/.local/bin is on PATH.
fn user_manual_dir() -> Result<PathBuf> {
    let data = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute());
    match (data, std::env::var_os("HOME")) {
        (Some(data), _) => Ok(data.join("man")),
        (None, Some(home)) => Ok(PathBuf::from(home).join(".local/share/man")),
        (None, None) => Err(crate::error::usage(
            "neither XDG_DATA_HOME nor HOME is set: name the folder with --dir DIR",
        )),
    }
}

/// Whether `man` searches `dir`: in the output of `manpath` (man-db), else in $MANPATH; None
/// when neither says.
fn on_manual_path(dir: &Path) -> Option<bool> {
    let listed = crate::exec::command("manpath", crate::exec::GitEnv::Inherit)
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .or_else(|| std::env::var("MANPATH").ok())?;
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    Some(listed.split(':').any(|entry| {
        let entry = Path::new(entry);
        entry.canonicalize().unwrap_or_else(|_| entry.to_path_buf()) == dir
    }))
}

/// `man --install`: writes every page into the manual folder's man1/.
pub fn install(args: InstallArgs) -> Result<i32> {
    let root = match args.dir {
        Some(dir) => dir,
        None => user_manual_dir()?,
    };
    let man1 = root.join("man1");
    if !args.install {
        crate::outln!(
            "`git conference man --install` writes the manual pages into {} (no sudo needed).",
            man1.display()
        );
        return Ok(0);
    }
    std::fs::create_dir_all(&man1)?;
    let pages = render_all()?;
    for (name, bytes) in &pages {
        std::fs::write(man1.join(name), bytes)?;
    }
    crate::outln!(
        "installed {} manual pages into {}",
        pages.len(),
        man1.display()
    );
    match on_manual_path(&root) {
        Some(true) => crate::outln!(
            "`man git-conference` and `git conference --help` open them."
        ),
        Some(false) => {
            // man-db maps each PATH entry `X/bin` to `X/share/man`.
            let local_bin = (root.ends_with(".local/share/man"))
                .then(|| root.parent().and_then(Path::parent).map(|p| p.join("bin")))
                .flatten()
                .map(|bin| format!(", or put {} on PATH (man then searches {})", bin.display(), root.display()))
                .unwrap_or_default();
            crate::outln!(
                "{} is not on your manual path (`manpath` does not list it), so `man` does not find them yet: add `export MANPATH=\"{}:$MANPATH\"` to your shell's profile (the `:` keeps the system's pages){local_bin}.",
                root.display(),
                root.display()
            )
        }
        None => crate::outln!(
            "could not ask `manpath` whether man searches {}: if `man git-conference` finds nothing, add it to MANPATH.",
            root.display()
        ),
    }
    Ok(0)
}

pub fn run(args: ManArgs) -> Result<i32> {
    std::fs::create_dir_all(&args.dir)?;
    for (name, bytes) in render_all()? {
        std::fs::write(args.dir.join(name), bytes)?;
    }
    Ok(0)
}
