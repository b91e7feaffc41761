//! Where an evaluation ran, as the attempt's note and event record it (all optional: a local
//! evaluation on a machine without `nvidia-smi` names only its launcher and host), and the
//! hardware class it was measured on: the GPU model and how many the run saw. Readings of two
//! classes are not one comparison (a timing read on an A100 and on an H100).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// local | command | ssh | slurm | ray
    pub launcher: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The Slurm job id, the Ray submission id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// The Slurm node, the Ray node's address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The GPU model `nvidia-smi` names, when it exists there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<String>,
    /// How many GPUs the run saw (those of `CUDA_VISIBLE_DEVICES` when set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<u32>,
    /// The NVIDIA driver's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// `CUDA_VISIBLE_DEVICES` as the run saw it (set by `devices` or by Ray).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub devices: Option<String>,
    /// `torch.__version__` and the CUDA version, when the evaluation printed them under
    /// [`VERSIONS_LINE`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<String>,
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
        if let Some(class) = self.class() {
            s.push_str(&format!(" ({class})"));
        }
        s
    }

    /// The hardware class the reading was taken on: the GPU model, with the count when more
    /// than one (`2× NVIDIA A100-SXM4-40GB`); None without a GPU that `nvidia-smi` names.
    pub fn class(&self) -> Option<String> {
        let gpu = self.gpu.as_deref()?;
        Some(match self.gpus {
            Some(n) if n > 1 => format!("{n}× {gpu}"),
            _ => gpu.to_string(),
        })
    }

    /// The class with what else is known of the machine: driver, torch, CUDA
    /// (`NVIDIA H100 80GB HBM3, driver 550.54, torch 2.5.1, CUDA 12.4`).
    pub fn class_detail(&self) -> Option<String> {
        let mut s = self.class()?;
        for (label, value) in [
            ("driver", &self.driver),
            ("torch", &self.torch),
            ("CUDA", &self.cuda),
        ] {
            if let Some(v) = value {
                s.push_str(&format!(", {label} {v}"));
            }
        }
        Some(s)
    }

    /// Reads the evaluation's [`VERSIONS_LINE`] (`versions: torch 2.5.1, cuda 12.4`) in
    /// `output`, the last one printed.
    pub fn read_versions(&mut self, output: &str) {
        let Some(line) = (output.lines().rev()).find_map(|l| l.trim().strip_prefix(VERSIONS_LINE))
        else {
            return;
        };
        for part in line.split(',') {
            let mut words = part.split_whitespace();
            let (Some(name), Some(version)) = (words.next(), words.next()) else {
                continue;
            };
            let version = Some(version.to_string()).filter(|v| v.len() <= 64);
            match name.to_ascii_lowercase().as_str() {
                "torch" => self.torch = version,
                "cuda" => self.cuda = version,
                _ => {}
            }
        }
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
                "gpus" => p.gpus = value.and_then(|v| v.parse().ok()),
                "driver" => p.driver = value,
                "devices" => p.devices = value,
                _ => {}
            }
        }
        p
    }
}

/// The line an evaluation may print so that its reading records the versions it ran with:
/// `versions: torch 2.5.1+cu124, cuda 12.4` (in Python:
/// `print(f"versions: torch {torch.__version__}, cuda {torch.version.cuda}")`).
pub const VERSIONS_LINE: &str = "versions:";

/// The hardware classes of `placements` when there is more than one (their readings are then
/// not one comparison), in order.
pub fn mixed_classes<'a>(placements: impl Iterator<Item = &'a Placement>) -> Option<Vec<String>> {
    let classes: std::collections::BTreeSet<String> =
        placements.filter_map(|p| p.class()).collect();
    (classes.len() > 1).then(|| classes.into_iter().collect())
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
        let mut p = Placement::read_lines(
            "ray",
            "host=n2\ngpu=NVIDIA A100-SXM4-40GB\ndriver=550.54\ngpus=2\ndevices=0,1\n",
        );
        p.read_versions("score: 1\nversions: torch 2.5.1+cu124, cuda 12.4\n");
        assert_eq!(p.class().as_deref(), Some("2× NVIDIA A100-SXM4-40GB"));
        assert_eq!(
            p.class_detail().as_deref(),
            Some("2× NVIDIA A100-SXM4-40GB, driver 550.54, torch 2.5.1+cu124, CUDA 12.4")
        );
        assert_eq!(p.devices.as_deref(), Some("0,1"));
    }
}
