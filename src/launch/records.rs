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
