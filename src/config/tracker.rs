//! `## Environment`'s tracker keys: `- mlflow: URL` (or `on`: the `MLFLOW_TRACKING_URI` of the
//! runner's environment, read when it runs) and `- mlflow experiment: NAME` (default: the
//! conference's name). Read here; `crate::tracker` sends.

use serde::{Deserialize, Serialize};

use super::parse::Document;
use super::sections::SectionKind;
use super::ConfigError;

/// The variable `- mlflow: on` reads, as MLflow's own clients do.
pub const TRACKING_URI_VAR: &str = "MLFLOW_TRACKING_URI";

/// Where attempts are sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mlflow {
    /// The tracking server's URL; None: `on`, the runner's `MLFLOW_TRACKING_URI`.
    pub uri: Option<String>,
    /// The experiment; None: the conference's name.
    pub experiment: Option<String>,
}

impl Mlflow {
    /// The URL to send to: the one written, else `MLFLOW_TRACKING_URI`'s (checked as a written
    /// one is), or why there is none.
    pub fn resolved_uri(&self) -> Result<String, String> {
        if let Some(uri) = &self.uri {
            return Ok(uri.clone());
        }
        let from_env = std::env::var(TRACKING_URI_VAR).unwrap_or_default();
        if from_env.trim().is_empty() {
            return Err(format!(
                "`- mlflow: on` sends to ${TRACKING_URI_VAR}, which is not set here"
            ));
        }
        http_url(from_env.trim()).map_err(|why| format!("${TRACKING_URI_VAR} {why}"))
    }

    /// The experiment's name for conference `name`.
    pub fn experiment_for(&self, name: &str) -> String {
        self.experiment.clone().unwrap_or_else(|| name.to_string())
    }
}

/// An `http(s)://host[:port][/path]` URL without a trailing slash, or why not.
pub fn http_url(value: &str) -> Result<String, String> {
    let v = value.trim().trim_end_matches('/');
    let rest = v
        .strip_prefix("http://")
        .or_else(|| v.strip_prefix("https://"));
    match rest {
        Some(r) if !r.is_empty() && !r.contains(char::is_whitespace) => Ok(v.to_string()),
        _ => Err(format!(
            "`{value}` is not an http:// or https:// URL of a tracking server (MLflow's REST \
             API; a file store or `databricks` is not supported)"
        )),
    }
}

/// Reads the tracker keys of `## Environment`; problems go to `errors`, each with its line.
pub fn read(doc: &Document, errors: &mut Vec<ConfigError>) -> Option<Mlflow> {
    let get = |key: &str| doc.setting(SectionKind::Environment, key);
    let experiment = get("mlflow experiment").and_then(|s| {
        let v = s.value.trim();
        if v.is_empty() || v.len() > 500 {
            errors.push(s.unusable(
                SectionKind::Environment,
                "must be an experiment's name (1 to 500 characters)".into(),
            ));
            return None;
        }
        Some(v.to_string())
    });
    let Some(s) = get("mlflow") else {
        if let Some(e) = get("mlflow experiment") {
            errors.push(e.unusable(
                SectionKind::Environment,
                "names an experiment, but no `- mlflow:` says where the tracking server is \
                 (add `- mlflow: http://127.0.0.1:5000`, or `- mlflow: on` for $MLFLOW_TRACKING_URI)"
                    .into(),
            ));
        }
        return None;
    };
    let value = s.value.trim();
    let off = ["", "none", "no", "off", "-", "n/a"];
    if off.contains(&value.to_ascii_lowercase().as_str()) {
        return None;
    }
    let uri = if value.eq_ignore_ascii_case("on") {
        None
    } else {
        match http_url(value) {
            Ok(u) => Some(u),
            Err(why) => {
                errors.push(s.unusable(SectionKind::Environment, why));
                return None;
            }
        }
    };
    Some(Mlflow { uri, experiment })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_text(body: &str) -> (Option<Mlflow>, Vec<ConfigError>) {
        let (doc, mut errors) = super::super::parse::read(&format!("## Environment\n{body}"));
        let m = read(&doc, &mut errors);
        (m, errors)
    }

    #[test]
    fn a_url_an_experiment_or_on() {
        let (m, e) = read_text("- mlflow: http://127.0.0.1:5000/\n- mlflow experiment: search\n");
        assert!(e.is_empty(), "{e:?}");
        let m = m.unwrap();
        assert_eq!(m.uri.as_deref(), Some("http://127.0.0.1:5000"));
        assert_eq!(m.experiment_for("c"), "search");
        let (m, e) = read_text("- mlflow: on\n");
        assert!(e.is_empty());
        assert_eq!(m.as_ref().unwrap().uri, None);
        assert_eq!(m.unwrap().experiment_for("c"), "c");
        assert_eq!(read_text("- mlflow: off\n").0, None);
    }

    #[test]
    fn bad_values_name_their_line() {
        let (_, e) = read_text("- mlflow: ./mlruns\n");
        assert_eq!(e[0].line, 2);
        assert!(
            e[0].message.contains("not an http:// or https:// URL"),
            "{e:?}"
        );
        let (_, e) = read_text("- mlflow experiment: x\n");
        assert!(e[0].message.contains("no `- mlflow:`"), "{e:?}");
        assert_eq!(e[0].hint, "- mlflow experiment: nanogpt-search");
    }
}
