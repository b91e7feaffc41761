//! Round transition: moves researcher worktrees to a new commit the way a round start does
//! (the branch moves, then `Conference::prepare_worktree`: open, repair, `snapshot::reset`), and
//! prints what each worktree took as JSON. Driven by bench/run.py, which builds the repository,
//! the worktrees and the commit; it times a fresh `git worktree add` of the same tree itself.
//!
//! Usage: transition <main-repo> <new-commit> (<worktree-path> <branch>)...

use std::path::Path;
use std::time::Instant;

use git2::{Oid, Repository};
use git_conference::git::{snapshot, worktree};

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    if args.len() < 4 || !args.len().is_multiple_of(2) {
        eprintln!("usage: transition <main-repo> <new-commit> (<worktree> <branch>)...");
        std::process::exit(2);
    }
    let main_repo = Path::new(&args[0]);
    let new = Oid::from_str(&args[1]).expect("commit id");
    let mut ms = Vec::new();
    for pair in args[2..].chunks(2) {
        let (path, branch) = (Path::new(&pair[0]), pair[1].as_str());
        let refname = format!("refs/heads/{branch}");
        let t = Instant::now();
        // start_round: the researcher branch moves to the round's start commit...
        let repo = Repository::open(main_repo).expect("open repo");
        repo.reference(&refname, new, true, "bench: round start")
            .expect("move branch");
        // ...then the researcher's loop prepares its worktree (Conference::prepare_worktree).
        worktree::repair_gitfile(&repo, path).expect("repair");
        let wt = Repository::open(path).expect("open worktree");
        snapshot::reset(&wt, new, Some(&refname)).expect("reset");
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let list: Vec<String> = ms.iter().map(|m| format!("{m:.3}")).collect();
    println!("{{\"ms\": [{}]}}", list.join(", "));
}
