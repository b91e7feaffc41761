//! End-to-end tests of the newcomer's traps (issue 22): the interactive `init` that asks what
//! researchers may change, a `start` that will not spend a night on a frozen train.py, the
//! Pre-Flight Gate's repeated settings edited once, a `program.md` brief in every prompt, an
//! unknown Evaluation key, the failed-baseline advice followed literally, the man pages
//! installed without sudo, and the karpathy walkthrough on a real terminal with the defaults.
//! The real binary runs as `git conference …` through the real `git`; results are read with git.

use crate::common;

use common::TestRepo;

/// The line number (1-based) of the first line of `text` containing `needle`.
fn line_of(text: &str, needle: &str) -> usize {
    text.lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no `{needle}` in:\n{text}"))
        + 1
}

/// An unknown key under `## Evaluation` below `- frozen:` (`- prune: on`) is an unknown key with
/// its line and the known keys, not a frozen path that matches no file.
#[test]
fn an_unknown_evaluation_key_is_named_as_one() {
    let repo = TestRepo::from_fixture("autoresearch");
    let text = repo.read("conference.md").replace(
        "- frozen: prepare.py\n",
        "- frozen: prepare.py\n- prune: on\n",
    );
    let run = repo.start("unknown", &text);
    assert_eq!(run.code, 2, "{}", run.stderr);
    let line = line_of(&text, "- prune: on");
    assert!(
        run.stderr.contains(&format!(
            "conference.md:{line}: unknown key `prune` in `## Evaluation`"
        )),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains(
            "fix: valid keys here: command, timeout, repeats, frozen, holdout, judge, metric from"
        ),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("matches no file"), "{}", run.stderr);
    // A path on its own bullet under `- frozen:` is still a frozen path.
    let listed = repo.read("conference.md").replace(
        "- frozen: prepare.py\n",
        "- frozen: prepare.py\n- train.py\n",
    );
    let run = repo.start("listed", &listed.replace("Autoresearch", "Listed"));
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("`train.py` is both frozen"),
        "{}",
        run.stderr
    );
}
