//! Shipping exactly a commit: `git archive` of it, never the worktree (which may hold what the
//! agent left, ignored files, another attempt's edits).

use std::path::Path;

use anyhow::{bail, Context, Result};

/// The commit's tree as a tar stream.
pub async fn archive(git_dir: &Path, commit: &str) -> Result<Vec<u8>> {
    archive_as(git_dir, commit, "tar").await
}

/// The commit's tree in one of `git archive`'s formats (`tar`, `zip`).
pub async fn archive_as(git_dir: &Path, commit: &str, format: &str) -> Result<Vec<u8>> {
    let out = crate::exec::async_command("git", crate::exec::GitEnv::Clear)
        .arg("--git-dir")
        .arg(git_dir)
        .arg("archive")
        .arg(format!("--format={format}"))
        .arg(commit)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .context("cannot run git archive")?;
    if !out.status.success() {
        bail!(
            "git archive {commit} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out.stdout)
}

/// Unpacks the commit into `dir/tree` (a fresh folder) and writes the wrapper as `dir/run.sh`.
pub async fn unpack(git_dir: &Path, commit: &str, dir: &Path, wrapper: &str) -> Result<()> {
    let tree = dir.join("tree");
    std::fs::create_dir_all(&tree).with_context(|| format!("cannot create {}", tree.display()))?;
    let tar = archive(git_dir, commit).await?;
    let mut child = crate::exec::async_command("tar", crate::exec::GitEnv::Clear)
        .arg("-x")
        .arg("-C")
        .arg(&tree)
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .context("cannot run tar")?;
    let mut stdin = child.stdin.take().expect("piped");
    let writing = tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        let _ = stdin.write_all(&tar).await;
    });
    let out = child.wait_with_output().await?;
    let _ = writing.await;
    if !out.status.success() {
        bail!(
            "cannot unpack {commit} in {}: {}",
            tree.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    std::fs::write(dir.join("run.sh"), wrapper)?;
    Ok(())
}
