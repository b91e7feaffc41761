use super::*;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=T",
            "-c",
            "user.email=t@e",
            "-c",
            "core.autocrlf=false",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// `capture` takes exactly what `git add -A` would: new (also in new folders), modified,
/// deleted, mode changes, a file replaced by a folder; ignored files stay out.
#[test]
fn capture_matches_git_add_all() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    git(dir, &["init", "-q"]);
    for (p, t) in [
        ("a.txt", "a"),
        ("d/b.txt", "b"),
        ("d/e/c.txt", "c"),
        ("x", "x"),
        (".gitignore", "build/\n*.log\n"),
        ("run.sh", "#!/bin/sh\n"),
    ] {
        std::fs::create_dir_all(dir.join(p).parent().unwrap()).unwrap();
        std::fs::write(dir.join(p), t).unwrap();
    }
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "base"]);
    std::fs::write(dir.join("a.txt"), "changed").unwrap();
    std::fs::remove_file(dir.join("d/e/c.txt")).unwrap();
    std::fs::create_dir_all(dir.join("new/deep")).unwrap();
    std::fs::write(dir.join("new/deep/n.txt"), "n").unwrap();
    std::fs::remove_file(dir.join("x")).unwrap();
    std::fs::create_dir_all(dir.join("x")).unwrap();
    std::fs::write(dir.join("x/inside.txt"), "i").unwrap();
    std::fs::set_permissions(dir.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::create_dir_all(dir.join("build")).unwrap();
    std::fs::write(dir.join("build/out.o"), "o").unwrap();
    std::fs::write(dir.join("debug.log"), "l").unwrap();
    let repo = Repository::open(dir).unwrap();
    let tree = capture(&repo).unwrap().tree;
    git(dir, &["add", "-A"]);
    assert_eq!(tree.to_string(), git(dir, &["write-tree"]));
    // Nothing changed since: the same tree again.
    assert_eq!(capture(&repo).unwrap().tree, tree);
}

/// `changed_paths` names what `git diff --name-only --no-renames` names: modified, deleted,
/// added in new folders, a file replaced by a folder, a mode change; untouched folders are
/// left out.
#[test]
fn changed_paths_matches_git_diff_name_only() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    git(dir, &["init", "-q"]);
    for (p, t) in [
        ("a.txt", "a"),
        ("d/b.txt", "b"),
        ("d/e/c.txt", "c"),
        ("same/s.txt", "s"),
        ("x", "x"),
        ("run.sh", "#!/bin/sh\n"),
    ] {
        std::fs::create_dir_all(dir.join(p).parent().unwrap()).unwrap();
        std::fs::write(dir.join(p), t).unwrap();
    }
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "base"]);
    std::fs::write(dir.join("a.txt"), "changed").unwrap();
    std::fs::remove_file(dir.join("d/e/c.txt")).unwrap();
    std::fs::create_dir_all(dir.join("new/deep")).unwrap();
    std::fs::write(dir.join("new/deep/n.txt"), "n").unwrap();
    std::fs::remove_file(dir.join("x")).unwrap();
    std::fs::create_dir_all(dir.join("x")).unwrap();
    std::fs::write(dir.join("x/inside.txt"), "i").unwrap();
    std::fs::set_permissions(dir.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "changes"]);
    let repo = Repository::open(dir).unwrap();
    let tree = |rev: &str| {
        repo.revparse_single(rev)
            .unwrap()
            .peel_to_tree()
            .unwrap()
            .id()
    };
    let mut ours = changed_paths(&repo, tree("HEAD~1"), tree("HEAD")).unwrap();
    ours.sort();
    let theirs = git(
        dir,
        &["diff", "--name-only", "--no-renames", "HEAD~1", "HEAD"],
    );
    let mut theirs: Vec<String> = theirs.lines().map(str::to_string).collect();
    theirs.sort();
    assert_eq!(ours, theirs);
    assert!(ours.contains(&"x/inside.txt".to_string()) && ours.contains(&"x".to_string()));
    // Both directions, and nothing for the same tree.
    let mut back = changed_paths(&repo, tree("HEAD"), tree("HEAD~1")).unwrap();
    back.sort();
    assert_eq!(back, theirs);
    assert!(changed_paths(&repo, tree("HEAD"), tree("HEAD"))
        .unwrap()
        .is_empty());
}

/// With a watch, the snapshot of the reported paths equals `git add -A`, and putting only
/// those paths back leaves a clean worktree at the base commit, ignored files untouched.
#[test]
fn watched_capture_and_reset_follow_the_changed_paths() {
    use crate::git::watch::{Changes, Watch};
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    git(dir, &["init", "-q"]);
    for (p, t) in [
        ("a.txt", "a"),
        ("d/b.txt", "b"),
        ("d/e/c.txt", "c"),
        ("x", "x"),
        ("gone/g.txt", "g"),
        (".gitignore", "build/\n*.log\n"),
        ("run.sh", "#!/bin/sh\n"),
    ] {
        std::fs::create_dir_all(dir.join(p).parent().unwrap()).unwrap();
        std::fs::write(dir.join(p), t).unwrap();
    }
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "base"]);
    let base = Oid::from_str(&git(dir, &["rev-parse", "HEAD"])).unwrap();
    let repo = Repository::open(dir).unwrap();
    let index_file = repo.path().join("index");
    std::fs::create_dir_all(dir.join("build")).unwrap();
    let skip = |p: &Path| repo.is_path_ignored(p).unwrap_or(false);
    let mut watch = Watch::start(dir, &index_file, &skip).expect("inotify");
    assert_eq!(watch.take(), Changes::Paths(vec![]));

    std::fs::write(dir.join("a.txt"), "changed").unwrap();
    std::fs::remove_file(dir.join("d/e/c.txt")).unwrap();
    std::fs::create_dir_all(dir.join("new/deep")).unwrap();
    std::fs::write(dir.join("new/deep/n.txt"), "n").unwrap();
    std::fs::remove_file(dir.join("x")).unwrap();
    std::fs::create_dir_all(dir.join("x")).unwrap();
    std::fs::write(dir.join("x/inside.txt"), "i").unwrap();
    std::fs::remove_dir_all(dir.join("gone")).unwrap();
    std::fs::set_permissions(dir.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(dir.join("build/out.o"), "o").unwrap();
    std::fs::write(dir.join("debug.log"), "l").unwrap();

    let Changes::Paths(paths) = watch.take() else {
        panic!("expected paths")
    };
    let tree = capture_paths(&repo, &paths).unwrap().tree;
    watch.settle();
    git(dir, &["add", "-A"]);
    assert_eq!(tree.to_string(), git(dir, &["write-tree"]));
    watch.settle();

    reset_paths(&repo, base, None, &paths, true).unwrap();
    assert_eq!(git(dir, &["status", "--porcelain"]), "");
    assert_eq!(std::fs::read_to_string(dir.join("a.txt")).unwrap(), "a");
    assert_eq!(std::fs::read_to_string(dir.join("x")).unwrap(), "x");
    assert!(dir.join("gone/g.txt").exists() && !dir.join("new").exists());
    assert!(dir.join("build/out.o").exists() && dir.join("debug.log").exists());

    // A revert that does not write the index file leaves it right for git too.
    watch.settle();
    std::fs::write(dir.join("a.txt"), "again").unwrap();
    std::fs::write(dir.join("junk.txt"), "j").unwrap();
    let Changes::Paths(paths) = watch.take() else {
        panic!("expected paths")
    };
    capture_paths(&repo, &paths).unwrap();
    reset_paths(&repo, base, None, &paths, false).unwrap();
    assert_eq!(git(dir, &["status", "--porcelain"]), "");
    assert_eq!(std::fs::read_to_string(dir.join("a.txt")).unwrap(), "a");

    // Touching the index (an agent running `git add`) makes the watch ask for a scan.
    watch.settle();
    std::fs::write(dir.join("a.txt"), "staged").unwrap();
    git(dir, &["add", "a.txt"]);
    assert_eq!(watch.take(), Changes::Everything);
}

/// A round start with a watch: moving a clean worktree to a new best rewrites the paths the
/// two trees differ in (changed, added in a new folder, deleted, replaced by a folder) and
/// the touched ones, ends exactly at the new commit for git, and leaves every other file
/// alone (not even rewritten); without a watch's word it checks everything out.
#[test]
fn advance_rewrites_only_the_difference() {
    use crate::git::watch::Watch;
    use std::os::unix::fs::MetadataExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    git(dir, &["init", "-q", "-b", "main"]);
    for i in 0..50 {
        std::fs::create_dir_all(dir.join(format!("src/d{}", i % 5))).unwrap();
        std::fs::write(dir.join(format!("src/d{}/f{i}.txt", i % 5)), format!("{i}")).unwrap();
    }
    std::fs::write(dir.join("x"), "x").unwrap();
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "old"]);
    let old = git(dir, &["rev-parse", "HEAD"]);
    std::fs::write(dir.join("src/d0/f0.txt"), "changed").unwrap();
    std::fs::remove_file(dir.join("src/d1/f1.txt")).unwrap();
    std::fs::create_dir_all(dir.join("new/deep")).unwrap();
    std::fs::write(dir.join("new/deep/n.txt"), "n").unwrap();
    std::fs::remove_file(dir.join("x")).unwrap();
    std::fs::create_dir_all(dir.join("x")).unwrap();
    std::fs::write(dir.join("x/inside.txt"), "i").unwrap();
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "new best"]);
    let new = Oid::from_str(&git(dir, &["rev-parse", "HEAD"])).unwrap();
    git(dir, &["branch", "researcher", &old]);
    git(dir, &["checkout", "-q", "researcher"]);
    let repo = Repository::open(dir).unwrap();
    let old_tree = repo
        .revparse_single(&format!("{old}^{{tree}}"))
        .unwrap()
        .id();
    // The branch moves to the new best (as a round start does); files are still the old ones.
    git(
        dir,
        &["update-ref", "refs/heads/researcher", &new.to_string()],
    );
    // Left behind after the last revert and reported by the watch: an untracked file.
    let skip = |p: &Path| repo.is_path_ignored(p).unwrap_or(false);
    let mut watch = Watch::start(dir, &repo.path().join("index"), &skip).expect("inotify");
    std::fs::write(dir.join("src/d2/leftover.tmp"), "t").unwrap();
    let inode = |p: &str| std::fs::metadata(dir.join(p)).unwrap().ino();
    let untouched = inode("src/d3/f3.txt");
    advance(
        &repo,
        old_tree,
        new,
        Some("refs/heads/researcher"),
        Some(&mut watch),
    )
    .unwrap();
    assert_eq!(git(dir, &["status", "--porcelain"]), "");
    assert_eq!(git(dir, &["rev-parse", "HEAD"]), new.to_string());
    assert_eq!(
        std::fs::read_to_string(dir.join("src/d0/f0.txt")).unwrap(),
        "changed"
    );
    assert!(!dir.join("src/d1/f1.txt").exists() && !dir.join("src/d2/leftover.tmp").exists());
    assert_eq!(
        std::fs::read_to_string(dir.join("x/inside.txt")).unwrap(),
        "i"
    );
    assert_eq!(
        inode("src/d3/f3.txt"),
        untouched,
        "a file outside the difference was rewritten"
    );

    // Without a watch, a change it was not told about is checked out too.
    git(dir, &["update-ref", "refs/heads/researcher", &old]);
    std::fs::write(dir.join("src/d4/f4.txt"), "edited by hand").unwrap();
    let new_tree = repo.find_commit(new).unwrap().tree_id();
    advance(
        &repo,
        new_tree,
        Oid::from_str(&old).unwrap(),
        Some("refs/heads/researcher"),
        None,
    )
    .unwrap();
    assert_eq!(git(dir, &["status", "--porcelain"]), "");
    assert_eq!(
        std::fs::read_to_string(dir.join("src/d4/f4.txt")).unwrap(),
        "4"
    );
    assert_eq!(std::fs::read_to_string(dir.join("x")).unwrap(), "x");
}

/// Makes a repository with one commit at `dir/rel` (what `git clone` or a scaffolder leaves).
fn nested_repo(dir: &Path, rel: &str) {
    let d = dir.join(rel);
    std::fs::create_dir_all(&d).unwrap();
    git(&d, &["init", "-q"]);
    std::fs::write(d.join("f.txt"), "x").unwrap();
    git(&d, &["add", "f.txt"]);
    git(&d, &["commit", "-q", "-m", "nested"]);
}

/// Nested repositories are left out of a snapshot and named (both the scan and the watched
/// paths), ignored ones are not; a revert removes the named ones and keeps the ignored one.
#[test]
fn nested_repositories_are_named_left_out_and_removed() {
    use crate::git::watch::{Changes, Watch};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    git(dir, &["init", "-q"]);
    std::fs::write(dir.join("a.txt"), "a").unwrap();
    std::fs::write(dir.join(".gitignore"), "build/\n").unwrap();
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "base"]);
    let base = Oid::from_str(&git(dir, &["rev-parse", "HEAD"])).unwrap();
    let repo = Repository::open(dir).unwrap();
    std::fs::create_dir_all(dir.join("build")).unwrap();
    let index_file = repo.path().join("index");
    let skip = |p: &Path| repo.is_path_ignored(p).unwrap_or(false);
    let mut watch = Watch::start(dir, &index_file, &skip).expect("inotify");

    let make = || {
        std::fs::write(dir.join("a.txt"), "changed").unwrap();
        nested_repo(dir, "sub");
        std::fs::create_dir_all(dir.join("new")).unwrap();
        std::fs::write(dir.join("new/n.txt"), "n").unwrap();
        nested_repo(dir, "new/vendor");
        if !dir.join("build/dep").exists() {
            nested_repo(dir, "build/dep");
        }
    };
    let expected_tree = |repo: &Repository| {
        // What the snapshot must hold: a.txt changed and new/n.txt, nothing nested.
        let mut b = repo.treebuilder(None).unwrap();
        let blob = |t: &str| repo.blob(t.as_bytes()).unwrap();
        let mut newdir = repo.treebuilder(None).unwrap();
        newdir.insert("n.txt", blob("n"), 0o100644).unwrap();
        b.insert(".gitignore", blob("build/\n"), 0o100644).unwrap();
        b.insert("a.txt", blob("changed"), 0o100644).unwrap();
        b.insert("new", newdir.write().unwrap(), 0o040000).unwrap();
        b.write().unwrap()
    };

    // Watched paths.
    make();
    let Changes::Paths(paths) = watch.take() else {
        panic!("expected paths")
    };
    let snap = capture_paths(&repo, &paths).unwrap();
    assert_eq!(snap.nested_repos, vec!["new/vendor", "sub"]);
    assert_eq!(snap.tree, expected_tree(&repo));
    let why = snap.rejection().unwrap();
    assert!(why.contains("sub/") && why.contains("new/vendor/"), "{why}");
    reset_paths(&repo, base, None, &paths, true).unwrap();
    watch.settle();
    assert_eq!(git(dir, &["status", "--porcelain"]), "");
    assert!(!dir.join("sub").exists() && !dir.join("new").exists());
    assert!(dir.join("build/dep/.git").exists(), "the ignored one stays");

    // A full scan, and a full reset.
    make();
    let snap = capture(&repo).unwrap();
    assert_eq!(snap.nested_repos, vec!["new/vendor", "sub"]);
    assert_eq!(snap.tree, expected_tree(&repo));
    reset(&repo, base, None).unwrap();
    assert_eq!(git(dir, &["status", "--porcelain"]), "");
    assert!(!dir.join("sub").exists() && !dir.join("new").exists());
    assert!(dir.join("build/dep/.git").exists(), "the ignored one stays");
    let clean = capture(&repo).unwrap();
    assert!(clean.nested_repos.is_empty() && clean.rejection().is_none());

    // Staged as a gitlink by `git add -A`: taken out of the index all the same.
    make();
    git(dir, &["add", "-A"]);
    assert!(git(dir, &["ls-files", "-s"]).contains("160000"));
    let snap = capture(&repo).unwrap();
    assert_eq!(snap.nested_repos, vec!["new/vendor", "sub"]);
    assert_eq!(snap.tree, expected_tree(&repo));
    reset(&repo, base, None).unwrap();
    assert_eq!(git(dir, &["status", "--porcelain"]), "");
    assert!(!dir.join("sub").exists() && !dir.join("new").exists());
    assert!(!git(dir, &["ls-files", "-s"]).contains("160000"));
}
