//! Trust boundaries (issue #14): the user's refs and repository are the user's, remotes move all
//! of a conference or nothing, and bad conference.md input is refused before anything exists.
//! Each test reproduces a failure of the adversarial pass through the real binary and real git.

use crate::common;

use std::path::Path;

use common::{daemon, ConfigBuilder, TestRepo};

fn rev(repo: &TestRepo, r: &str) -> String {
    repo.git(&["rev-parse", "--verify", "-q", r])
        .trim()
        .to_string()
}

/// A commit on top of `parent` adding `file`, on no branch (what a fetch or a tag brings in).
fn foreign_commit(repo: &TestRepo, parent: &str, file: &str) -> String {
    let blob = repo
        .command("git")
        .args(["hash-object", "-w", "--stdin"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin
                .take()
                .unwrap()
                .write_all(b"not from the conference\n")?;
            c.wait_with_output()
        })
        .unwrap();
    let blob = String::from_utf8_lossy(&blob.stdout).trim().to_string();
    let base_tree = rev(repo, &format!("{parent}^{{tree}}"));
    repo.git(&["read-tree", "--index-output=.git/foreign-index", &base_tree]);
    let tree = repo
        .command("git")
        .env("GIT_INDEX_FILE", ".git/foreign-index")
        .args(["update-index", "--add", "--cacheinfo"])
        .arg(format!("100644,{blob},{file}"))
        .status()
        .unwrap();
    assert!(tree.success());
    let tree = repo
        .command("git")
        .env("GIT_INDEX_FILE", ".git/foreign-index")
        .args(["write-tree"])
        .output()
        .unwrap();
    let tree = String::from_utf8_lossy(&tree.stdout).trim().to_string();
    repo.git(&["commit-tree", &tree, "-p", parent, "-m", "foreign"])
        .trim()
        .to_string()
}

// --- the user's things are the user's --------------------------------------------------------

#[test]
fn apply_merges_the_best_branch_never_a_tag_or_a_fetched_ref_of_that_name() {
    let repo = TestRepo::complement_conference("ap");
    let head = rev(&repo, "HEAD");
    let best = rev(&repo, "refs/heads/conference/ap/best");
    let evil = foreign_commit(&repo, &head, "evil.txt");
    // Both spellings git would prefer to the branch for the short name `conference/ap/best`.
    repo.git(&["tag", "conference/ap/best", &evil]);
    repo.git(&["update-ref", "refs/conference/ap/best", &evil]);
    let run = repo.conference(&["apply", "ap", "--yes"]).ok();
    assert!(!run.stdout.contains("evil.txt"), "{}", run.stdout);
    assert_eq!(rev(&repo, "HEAD^1"), head);
    assert_eq!(rev(&repo, "HEAD^2"), best, "the branch's tip was merged");
    assert!(!repo.dir.join("evil.txt").exists());
    assert_eq!(repo.read("a.txt").trim(), "8");
}

#[test]
fn clean_all_keeps_the_users_commits_unknown_branches_and_the_branch_head_is_on() {
    let repo = TestRepo::complement_conference("ck");
    // Worktrees first, so that the main worktree can check a researcher branch out.
    repo.conference(&["clean", "ck"]).ok();
    let best = rev(&repo, "refs/heads/conference/ck/best");
    let mine = foreign_commit(&repo, &best, "mine.txt");
    repo.git(&["update-ref", "refs/heads/conference/ck/best", &mine, &best]);
    repo.git(&["branch", "conference/ck/notes", "main"]);
    repo.git(&["checkout", "-q", "conference/ck/researcher-B"]);
    let on_b = rev(&repo, "HEAD");

    let run = repo.conference(&["clean", "--all", "ck"]).ok();
    let left = repo.git(&[
        "for-each-ref",
        "--format=%(refname)",
        "refs/conference/ck/",
        "refs/heads/conference/ck/",
    ]);
    let mut left: Vec<&str> = left.lines().collect();
    left.sort();
    assert_eq!(
        left,
        vec![
            "refs/heads/conference/ck/best",
            "refs/heads/conference/ck/notes",
            "refs/heads/conference/ck/researcher-B",
        ],
        "{}",
        run.stdout
    );
    assert_eq!(rev(&repo, "refs/heads/conference/ck/best"), mine);
    // HEAD still names a branch with commits (git would say "No commits yet" otherwise).
    assert_eq!(rev(&repo, "HEAD"), on_b);
    for named in [
        "conference/ck/best",
        "conference/ck/notes",
        "conference/ck/researcher-B",
        "checked out",
    ] {
        assert!(run.stdout.contains(named), "{named}: {}", run.stdout);
    }
    repo.git(&["fsck", "--no-progress"]);
}

#[test]
fn demo_under_git_dir_never_touches_the_callers_repository() {
    let repo = TestRepo::new();
    repo.write("mine.txt", "my work\n");
    repo.commit_all("my work");
    let head = rev(&repo, "HEAD");
    let demo = repo.tmp.path().join("demo");
    let elsewhere = repo.tmp.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let git_dir = format!("--git-dir={}", repo.git_dir().display());
    let out = repo
        .command("git")
        .current_dir(&elsewhere)
        .args([git_dir.as_str(), "conference", "demo", "--dir"])
        .arg(&demo)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(rev(&repo, "HEAD"), head, "nothing was committed onto main");
    assert_eq!(repo.git(&["status", "--porcelain"]), "");
    assert_eq!(repo.read("mine.txt"), "my work\n");
    assert_eq!(
        repo.git(&["for-each-ref", "refs/conference/", "refs/heads/conference/"]),
        ""
    );
    // The demo has its own repository with its conference.
    let events = repo.git_in(&demo, &["rev-parse", "refs/conference/demo/events"]);
    assert!(!events.trim().is_empty());
}

// --- remotes ---------------------------------------------------------------------------------

/// The remote's conference refs, one `<sha> <ref>` line each.
fn remote_refs(repo: &TestRepo, remote: &Path) -> String {
    repo.git_in(
        remote,
        &[
            "for-each-ref",
            "--format=%(objectname) %(refname)",
            "refs/conference/",
            "refs/heads/conference/",
        ],
    )
}

#[test]
fn a_refused_push_moves_nothing_on_the_remote() {
    let repo = TestRepo::from_fixture("complement");
    let config = ConfigBuilder::new("Share", "./agent.sh")
        .count(2)
        .iterations(1)
        .rounds(2)
        .constraint("- **Pause every:** 1")
        .build();
    assert_eq!(repo.start("share", &config).code, 3);
    let remote = repo.bare_origin();
    repo.conference(&["push", "origin"]).ok();
    // Someone else's event on the remote, which this repository lacks.
    let events = "refs/conference/share/events";
    let tip = repo
        .git_in(&remote, &["rev-parse", events])
        .trim()
        .to_string();
    let tree = format!("{tip}^{{tree}}");
    let other = repo.git_in(
        &remote,
        &["commit-tree", &tree, "-p", &tip, "-m", "elsewhere"],
    );
    repo.git_in(&remote, &["update-ref", events, other.trim()]);
    let before = remote_refs(&repo, &remote);
    // Here the conference goes on: every other ref is a fast-forward of the remote's.
    repo.conference(&["resume", "share"]).ok();
    assert_ne!(
        rev(&repo, "refs/heads/conference/share/best"),
        before
            .lines()
            .find(|l| l.ends_with("/best"))
            .unwrap()
            .split(' ')
            .next()
            .unwrap()
    );
    let run = repo.conference(&["push", "origin"]);
    assert_ne!(run.code, 0, "{}", run.stdout);
    assert!(
        run.stderr.contains("git conference fetch"),
        "{}",
        run.stderr
    );
    assert_eq!(remote_refs(&repo, &remote), before, "all refs or none");
}

#[test]
fn fetch_takes_a_path() {
    let repo = TestRepo::complement_conference("fp");
    let remote = repo.tmp.path().join("remote.git");
    repo.git(&["init", "-q", "--bare", remote.to_str().unwrap()]);
    repo.git(&["push", "-q", remote.to_str().unwrap(), "main"]);
    repo.conference(&["push", remote.to_str().unwrap()]).ok();
    let clone = repo.tmp.path().join("clone");
    repo.git(&[
        "clone",
        "-q",
        remote.to_str().unwrap(),
        clone.to_str().unwrap(),
    ]);
    // An absolute path, then a relative one.
    let run = repo.conference_in(&clone, &["fetch", remote.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let run = repo.conference_in(&clone, &["fetch", "../remote.git"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(
        repo.git_in(&clone, &["rev-parse", "refs/conference/fp/events"]),
        repo.git(&["rev-parse", "refs/conference/fp/events"])
    );
    let status = repo.conference_in(&clone, &["status", "fp"]);
    assert_eq!(status.code, 0, "{}", status.stderr);
}

#[test]
fn push_and_fetch_through_a_git_url() {
    let repo = TestRepo::complement_conference("url");
    let served = repo.tmp.path().join("served");
    let remote = served.join("remote.git");
    repo.git(&["init", "-q", "--bare", remote.to_str().unwrap()]);
    let d = daemon(&repo, &served);
    let url = format!("git://127.0.0.1:{}/remote.git", d.1);
    repo.git(&["push", "-q", &url, "main"]);
    repo.conference(&["push", &url]).ok();
    assert_eq!(
        repo.git_in(&remote, &["rev-parse", "refs/heads/conference/url/best"]),
        repo.git(&["rev-parse", "refs/heads/conference/url/best"])
    );
    let clone = repo.tmp.path().join("clone");
    repo.git(&["clone", "-q", &url, clone.to_str().unwrap()]);
    let run = repo.conference_in(&clone, &["fetch", &url]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(
        repo.git_in(&clone, &["rev-parse", "refs/conference/url/events"]),
        repo.git(&["rev-parse", "refs/conference/url/events"])
    );
    // The fetched refs are kept under a ref-safe name for the URL.
    let kept = repo.git_in(
        &clone,
        &[
            "for-each-ref",
            "--format=%(refname)",
            "refs/conference-remotes/",
        ],
    );
    assert!(kept.contains("/conference/url/events"), "{kept}");
    drop(d);
}

// --- bad conference.md input -----------------------------------------------------------------

/// Everything a conference could have left: refs, branches, worktrees, its run folder.
fn traces(repo: &TestRepo) -> (String, String, bool) {
    (
        repo.git(&["for-each-ref", "--format=%(refname)"]),
        repo.git(&["worktree", "list", "--porcelain"]),
        repo.git_dir().join("conference").exists(),
    )
}

fn config() -> String {
    ConfigBuilder::new("Bad input", "./agent.sh").build()
}

#[test]
fn bad_config_input_is_refused_with_the_line_and_leaves_nothing_behind() {
    let repo = TestRepo::from_fixture("complement");
    let clean = traces(&repo);
    let good = config();
    let line_of =
        |text: &str, needle: &str| text.lines().position(|l| l.contains(needle)).unwrap() + 1;
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "repeats",
            good.replace(
                "- timeout: 30s\n- frozen",
                "- timeout: 30s\n- repeats: 1000000000\n- frozen",
            ),
            "repeats",
        ),
        (
            "duration",
            good.replacen("- timeout: 30s", "- timeout: 99999999999999999h", 1),
            "timeout",
        ),
        (
            "count",
            good.replace("**Count:** 1", "**Count:** 100000"),
            "Count",
        ),
        (
            "noise",
            good.replace("**Noise runs:** 1", "**Noise runs:** 5000"),
            "Noise runs",
        ),
        (
            "nul",
            good.replace("- command: ./eval.sh", "- command: ./eval.sh\0--x"),
            "command: ./eval.sh",
        ),
    ];
    for (what, text, needle) in &cases {
        let run = repo.start("bad", text);
        assert_eq!(run.code, 2, "{what}: {}{}", run.stdout, run.stderr);
        let line = line_of(text, needle);
        assert!(
            run.stderr.contains(&format!("conference.md:{line}:")),
            "{what}: {}",
            run.stderr
        );
        assert!(!run.stderr.contains("panicked"), "{what}: {}", run.stderr);
        assert_eq!(traces(&repo), clean, "{what} left something behind");
        if *what == "count" {
            assert!(
                run.stderr
                    .contains("one runner was measured to carry 256 researchers"),
                "the count's maximum names its measurement: {}",
                run.stderr
            );
        }
    }
    // A branch named `conference` blocks every conference ref: refused before anything exists.
    repo.git(&["branch", "conference"]);
    let clean = traces(&repo);
    let run = repo.start("bad", &good);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("refs/heads/conference"),
        "{}",
        run.stderr
    );
    assert_eq!(
        traces(&repo),
        clean,
        "a refused start left something behind"
    );
}

/// A start that git refuses once the conference exists (the researchers' checkout fails: a
/// post-checkout hook that exits 1, `filter.lfs.required` without git-lfs) exits 2 with git's
/// reason and removes everything it made: refs, notes, worktrees and their folder, the run
/// folder, the approval. Once the cause is fixed, the same start works.
#[test]
fn a_start_git_refuses_midway_leaves_nothing_behind() {
    let repo = TestRepo::from_fixture("complement");
    let good = config();
    let clean = traces(&repo);
    let hook = repo.git_dir().join("hooks/post-checkout");
    std::fs::create_dir_all(hook.parent().unwrap()).unwrap();
    std::fs::write(&hook, "#!/bin/sh\necho the hook says no >&2\nexit 1\n").unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let leftovers = |repo: &TestRepo| {
        (
            traces(repo),
            repo.worktrees_root().exists(),
            repo.git_run(&["config", "--get-regexp", "^conference\\."])
                .stdout,
        )
    };
    let nothing = (clean.clone(), false, String::new());

    let run = repo.start("hooked", &good);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("the hook says no"), "{}", run.stderr);
    assert!(
        run.stderr.contains("nothing of `hooked` was kept"),
        "{}",
        run.stderr
    );
    assert_eq!(
        leftovers(&repo),
        nothing,
        "the refused start left something"
    );
    std::fs::remove_file(&hook).unwrap();

    // An LFS-tracked file, committed before the filter was required; git-lfs is not installed.
    repo.write(".gitattributes", "*.bin filter=lfs\n");
    repo.write("data.bin", "weights\n");
    repo.commit_all("data");
    let clean = traces(&repo);
    repo.git(&["config", "filter.lfs.required", "true"]);
    repo.git(&[
        "config",
        "filter.lfs.smudge",
        "git-lfs-missing smudge -- %f",
    ]);
    repo.git(&[
        "config",
        "filter.lfs.process",
        "git-lfs-missing filter-process",
    ]);
    let run = repo.start("lfs", &good);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("lfs"), "{}", run.stderr);
    assert_eq!(
        leftovers(&repo),
        (clean, false, String::new()),
        "the refused start left something"
    );
    repo.git(&["config", "--remove-section", "filter.lfs"]);
    let run = repo.start("lfs", &good);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
}

#[test]
fn config_file_bytes_bom_non_utf8_and_folders() {
    let repo = TestRepo::from_fixture("complement");
    let good = ConfigBuilder::new("Bom", "./agent.sh").build();
    // Not UTF-8: exit 2 with the line, nothing created.
    let mut bytes = good.clone().into_bytes();
    let at = good.find("## Goal").unwrap() + "## Goal\n".len();
    bytes.splice(at..at, [0xff, 0xfe, b'\n']);
    std::fs::write(repo.dir.join("latin.md"), &bytes).unwrap();
    let run = repo.conference(&["start", "x", "--config", "latin.md"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("not UTF-8") && run.stderr.contains("line 4 "),
        "{}",
        run.stderr
    );
    // A folder: exit 2 saying so.
    std::fs::create_dir_all(repo.dir.join("confdir")).unwrap();
    let run = repo.conference(&["start", "x", "--config", "confdir"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("is a folder"), "{}", run.stderr);
    assert_eq!(repo.git(&["for-each-ref", "refs/conference/"]), "");
    // A byte order mark is accepted.
    let mut bom = b"\xef\xbb\xbf".to_vec();
    bom.extend(good.as_bytes());
    std::fs::write(repo.dir.join("conference.md"), &bom).unwrap();
    let run = repo.conference(&["start", "bom"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(repo.status_json("bom")["status"], "completed");
}

#[test]
fn resume_leaves_alone_a_git_lock_a_live_process_holds() {
    let repo = TestRepo::from_fixture("complement");
    let config = ConfigBuilder::new("Locks", "./agent.sh")
        .count(2)
        .iterations(1)
        .rounds(2)
        .constraint("- **Pause every:** 1")
        .build();
    assert_eq!(repo.start("locks", &config).code, 3);
    let lock = repo.git_dir().join("packed-refs.lock");
    let mut holder = std::process::Command::new("python3")
        .arg("-c")
        .arg("import sys, time; f = open(sys.argv[1], 'w'); time.sleep(60)")
        .arg(&lock)
        .spawn()
        .unwrap();
    while !lock.exists() {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Older than the second after which an unheld lock counts as stale.
    std::thread::sleep(std::time::Duration::from_millis(1200));
    let run = repo.conference(&["resume", "locks"]);
    let alive = lock.exists();
    let _ = holder.kill();
    let _ = holder.wait();
    assert!(alive, "resume removed a lock a live process holds");
    assert!(
        run.stderr.contains("packed-refs.lock is held by process"),
        "{}",
        run.stderr
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
}

/// A SHA-256 repository cannot be read through libgit2 yet: every command says so (exit 2),
/// instead of "not a git repository".
#[test]
fn a_sha256_repository_is_refused_with_the_reason() {
    let repo = TestRepo::new();
    let dir = repo.tmp.path().join("sha256");
    std::fs::create_dir_all(&dir).unwrap();
    repo.git_in(&dir, &["init", "-q", "--object-format=sha256"]);
    std::fs::write(dir.join("conference.md"), config()).unwrap();
    for args in [&["start", "x"][..], &["status"], &["list"]] {
        let run = repo.conference_in(&dir, args);
        assert_eq!(run.code, 2, "{args:?}: {}{}", run.stdout, run.stderr);
        assert!(run.stderr.contains("SHA-256 repository"), "{}", run.stderr);
    }
}
