//! builtin:tune's batch (`- sweep: q` under `## Agent`) as the sweep machinery measures it: each
//! proposed point becomes one variant, named by the literals it moves from the node the attempt
//! started from, as the file will read (`x=1.5 y=-2`), so the record, the progress line and
//! `log --graph` say the point rather than one literal's value.

use std::collections::BTreeSet;

use crate::model::sweep::{BatchPoint, BatchRequest};
use crate::researchers::tune::{self, Proposal};

/// The batch of `proposals` made from `files` (the start node's tunable files).
pub fn request(files: &[(String, String)], proposals: &[Proposal]) -> BatchRequest {
    let start = tune::extract_params(files);
    let mut keys = BTreeSet::new();
    let points = proposals
        .iter()
        .map(|p| {
            let moved: Vec<&String> = (p.params.iter())
                .filter(|(k, v)| start.get(*k) != Some(*v))
                .map(|(k, _)| k)
                .collect();
            keys.extend(moved.iter().map(|k| k.to_string()));
            BatchPoint {
                label: label(files, p, &moved),
                files: p.files.clone(),
            }
        })
        .collect();
    BatchRequest {
        keys: keys.into_iter().collect(),
        points,
    }
}

/// `x=1.5 y=-2`: each moved literal's name and its new value as the file writes it.
fn label(files: &[(String, String)], p: &Proposal, moved: &[&String]) -> String {
    let after: Vec<(String, String)> = (files.iter())
        .map(|(path, text)| {
            let new = p.files.iter().find(|(q, _)| q == path);
            (path.clone(), new.map_or(text, |(_, t)| t).clone())
        })
        .collect();
    let written = tune::find_all(&after);
    let parts: Vec<String> = moved
        .iter()
        .map(|key| {
            let name = key.rsplit(':').next().unwrap_or(key);
            let text = (written.iter().find(|l| &&l.key == key))
                .map_or_else(|| format!("{}", p.params[key.as_str()]), |l| l.text.clone());
            format!("{name}={text}")
        })
        .collect();
    match parts.is_empty() {
        true => "start".to_string(),
        false => parts.join(" "),
    }
}
