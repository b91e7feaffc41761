//! Where an evaluation ran, as the attempt's note and event record it (all optional: a local
//! evaluation on a machine without `nvidia-smi` names only its launcher and host).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// local | command | ssh | slurm
    pub launcher: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The Slurm job id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// The Slurm node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The GPU model `nvidia-smi` names, when it exists there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<String>,
}

impl Placement {
    /// `ssh gpu1 (NVIDIA H100)`, `slurm job 12 on node3`, `local`: for notes and reports.
    pub fn describe(&self) -> String {
        let mut s = self.launcher.clone();
        if let Some(job) = &self.job {
            s.push_str(&format!(" job {job}"));
        }
        match (&self.node, &self.host) {
            (Some(node), _) => s.push_str(&format!(" on {node}")),
            (None, Some(host)) => s.push_str(&format!(" on {host}")),
            _ => {}
        }
        if let Some(gpu) = &self.gpu {
            s.push_str(&format!(" ({gpu})"));
        }
        s
    }

    /// Reads the `key=value` lines a launcher's wrapper wrote (`host=`, `job=`, `node=`, `gpu=`).
    pub fn read_lines(launcher: &str, text: &str) -> Placement {
        let mut p = Placement {
            launcher: launcher.to_string(),
            ..Placement::default()
        };
        for line in text.lines() {
            let line = line.strip_prefix(WHERE_PREFIX).unwrap_or(line);
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            let value = Some(value.trim().to_string()).filter(|v| !v.is_empty());
            match key.trim() {
                "host" => p.host = value,
                "job" => p.job = value,
                "node" => p.node = value,
                "gpu" => p.gpu = value,
                _ => {}
            }
        }
        p
    }
}

/// The prefix of the lines by which a wrapper whose files do not come back (the `command`
/// launcher) says where it ran, on its stderr.
pub const WHERE_PREFIX: &str = "git-conference-where: ";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wrappers_lines_name_where_it_ran() {
        let p = Placement::read_lines(
            "slurm",
            "host=n1\njob=12\nnode=n1\ngpu=NVIDIA H100 80GB HBM3\nnoise\n",
        );
        assert_eq!(p.describe(), "slurm job 12 on n1 (NVIDIA H100 80GB HBM3)");
        let p = Placement::read_lines("command", "git-conference-where: host=pod-1\ngpu=\n");
        assert_eq!((p.host.as_deref(), p.gpu), (Some("pod-1"), None));
    }
}
