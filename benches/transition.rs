//! Round transition: moves researcher worktrees to a new commit the way a round start does, and
//! prints what each worktree took as JSON. Driven by bench/run.py, which builds the repository,
//! the worktrees and the commit; it times a fresh `git worktree add` of the same tree itself.
//!
//! Two ways, as in `research::researcher_loop`:
//! - `--watched` (a round start in a running conference): the worktree's inotify watch has been
//!   running since the worktree was last left clean (started here before the clock starts, as the
//!   previous phase started it); the branch moves, then open, `snapshot::advance` over the tree
//!   difference and what the watch saw.
//! - `--full` (the first round of a run, e.g. after `start` or `resume`): the branch moves, then
//!   `Conference::prepare_worktree`'s open, repair and `snapshot::reset` (a forced checkout).
//!
//! Usage: transition (--watched|--full) <main-repo> <new-commit> (<worktree-path> <branch>)...

use std::path::Path;
use std::time::Instant;

use git2::{Oid, Repository};
use git_conference::git::watch::Watch;
use git_conference::git::{snapshot, worktree};

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let watched = match args.first().map(String::as_str) {
        Some("--watched") => true,
        Some("--full") => false,
        _ => usage(),
    };
    let args = &args[1..];
    if args.len() < 4 || !args.len().is_multiple_of(2) {
        usage();
    }
    let main_repo = Path::new(&args[0]);
    let new = Oid::from_str(&args[1]).expect("commit id");
    let mut ms = Vec::new();
    for pair in args[2..].chunks(2) {
        let (path, branch) = (Path::new(&pair[0]), pair[1].as_str());
        let refname = format!("refs/heads/{branch}");
        // What the previous phase left: the tree the worktree is at, and its running watch.
        let before = Repository::open(path).expect("open worktree");
        let from = before.head().unwrap().peel_to_tree().unwrap().id();
        let mut watch = watched.then(|| {
            let skip = |p: &Path| before.is_path_ignored(p).unwrap_or(false);
            Watch::start(path, &before.path().join("index"), &skip).expect("inotify")
        });
        drop(before);
        let t = Instant::now();
        // start_round: the researcher branch moves to the round's start commit...
        let repo = Repository::open(main_repo).expect("open repo");
        repo.reference(&refname, new, true, "bench: round start")
            .expect("move branch");
        // ...then the researcher's loop brings its worktree there.
        worktree::repair_gitfile(&repo, path).expect("repair");
        let wt = Repository::open(path).expect("open worktree");
        snapshot::advance(&wt, from, new, Some(&refname), watch.as_mut()).expect("advance");
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let list: Vec<String> = ms.iter().map(|m| format!("{m:.3}")).collect();
    println!("{{\"ms\": [{}]}}", list.join(", "));
}

fn usage() -> ! {
    eprintln!(
        "usage: transition (--watched|--full) <main-repo> <new-commit> (<worktree> <branch>)..."
    );
    std::process::exit(2);
}
