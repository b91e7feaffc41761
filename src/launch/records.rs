//! What a remote run leaves until it is collected, written down before it is submitted: one
//! file per run under `<run-dir>/launched/`. A runner killed with `kill -9` cannot cancel its
//! jobs; the next one (`resume`, `clean`) reads these files and does.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// A submitted run.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "launcher", rename_all = "lowercase")]
pub enum Record {
    /// A process group on an ssh host, whose wrapper wrote its pid into `dir/pid`.
    Ssh {
        ssh: Vec<String>,
        host: String,
        dir: String,
    },
    /// A Slurm job, by its unique name (known before `sbatch` returns its id).
    Slurm { name: String, dir: PathBuf },
    /// A local submitter (its process group is ended with the runner's own) and its staged tree.
    Command { dir: PathBuf },
    /// A Ray job, by the submission id chosen before it was submitted, at its Jobs API.
    Ray { address: String, id: String },
}

/// Writes `record` as `dir/<name>.json` (whole or not at all).
pub fn write(dir: &Path, name: &str, record: &Record) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(format!("{name}.json"));
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, serde_json::to_vec(record)?)?;
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

/// Cancels every run a killed runner left (jobs, remote process groups) and removes what it
/// staged; returns how many there were. Called with the run lock held, before anything runs.
pub fn cancel_left_behind(run_dir: &Path) -> usize {
    if !run_dir.join("launched").is_dir() {
        return 0;
    }
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt.block_on(cancel_records(run_dir)),
        Err(_) => 0,
    }
}

async fn cancel_records(run_dir: &Path) -> usize {
    let dir = run_dir.join("launched");
    let mut cancelled = 0;
    for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let record = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<Record>(&b).ok());
        match record {
            Some(Record::Ssh { ssh, host, dir }) => {
                super::ssh::kill_remote(&ssh, &host, &dir, true).await;
            }
            Some(Record::Slurm { name, dir }) => {
                super::slurm::cancel_by_name(&name).await;
                let _ = std::fs::remove_dir_all(dir);
            }
            Some(Record::Command { dir }) => {
                let _ = std::fs::remove_dir_all(dir);
            }
            Some(Record::Ray { address, id }) => {
                super::ray::Api::new(&address).stop(&id).await;
            }
            None => {}
        }
        cancelled += usize::from(path.extension().is_some_and(|e| e == "json"));
        let _ = std::fs::remove_file(&path);
    }
    cancelled
}
