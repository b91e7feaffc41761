//! What a killed runner left on launchers (jobs, remote process groups, staged trees), found in
//! the records it wrote before each submission (`records`) and cancelled by the next runner
//! (`resume`, `clean`) before anything runs.

use std::path::Path;

use super::records::Record;

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
