//! The script that runs one evaluation of a staged tree where the launcher put it.
//!
//! It is the same for every launcher, so that what the evaluation sees does not depend on where
//! it runs: the tree is `git archive` of the attempt's commit, the remote shared data linked in by
//! name, `setup` run once in it, then the command with the conference's variables. It writes down
//! where it ran (`where`), when the command started (`started`, after setup: the evaluation
//! timeout runs from there) and the command's exit code (`exit`, written last, by rename): that
//! file is the truth, whatever the scheduler says of the job.

use crate::config::launcher::RemoteShared;

/// How the wrapper reports back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Report {
    /// In files next to `tree/` in the folder given as its first argument (ssh, Slurm), and
    /// `started` on stdout once the command starts.
    Files,
    /// Through its own stdout, stderr and exit code, where lines on stderr (the `command`
    /// launcher: the submitter streams them back, files on the far side do not come back).
    Streams,
    /// Everything in one stream, its stdout (a Ray job's log, which holds stdout and stderr
    /// together): the command's stdout as it is, and the wrapper's own lines, each behind
    /// [`LOG_MARK`]: `begin`, where it ran (`host=…`), `started`, the command's stderr
    /// (`stderr …`, at its end) and last `exit=N`.
    Log,
}

/// What starts each of the wrapper's own lines in [`Report::Log`]. Printable: Ray's job log
/// splits lines at control characters such as ASCII's record separator, and drops them.
pub const LOG_MARK: &str = "::git-conference:: ";

/// What the wrapper runs.
pub struct Wrapped<'a> {
    pub command: &'a str,
    pub env: &'a [(String, String)],
    pub setup: Option<&'a str>,
    pub shared: &'a [RemoteShared],
    pub report: Report,
}

/// `text` as one word for `sh`.
pub fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// The variables an evaluation gets wherever it runs: `K='v'` words.
pub fn assignments(env: &[(String, String)]) -> String {
    let words: Vec<String> = env
        .iter()
        .filter(|(k, _)| is_name(k))
        .map(|(k, v)| format!("{k}={}", quote(v)))
        .collect();
    words.join(" ")
}

fn is_name(key: &str) -> bool {
    !key.is_empty()
        && !key.starts_with(|c: char| c.is_ascii_digit())
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The wrapper script.
pub fn script(w: &Wrapped) -> String {
    let mut s = String::from("#!/bin/sh\n# git-conference: one evaluation of a staged tree\n");
    let (where_to, started, out, prefix) = match w.report {
        Report::Files => {
            s.push_str("d=$1\necho $$ >\"$d/pid\"\ncd \"$d/tree\" || exit 97\n");
            (
                "\"$d/where\"",
                "date +%s >\"$d/started\"; echo started\n",
                " >\"$d/out\" 2>\"$d/err\"",
                "",
            )
        }
        Report::Streams => ("&2", "", "", crate::model::placement::WHERE_PREFIX),
        Report::Log => {
            s.push_str("M='::git-conference:: '\necho \"${M}begin\"\ne=$(mktemp) || exit 97\n");
            ("&1", "echo \"${M}started\"\n", " 2>\"$e\"", "${M}")
        }
    };
    let env = assignments(w.env);
    if !env.is_empty() {
        // Before the lines of where it ran: they name the devices the run was given.
        s.push_str(&format!("export {env}\n"));
    }
    s.push_str(&where_lines(prefix, where_to));
    for link in w.shared {
        let name = quote(&link.name);
        s.push_str(&format!(
            "mkdir -p \"$(dirname {name})\" && rm -rf {name} && ln -s {} {name}\n",
            quote(&link.path)
        ));
    }
    if let Some(setup) = w.setup {
        s.push_str(&setup_lines(setup, w.report));
    }
    s.push_str(started);
    s.push_str(&format!(
        "sh -c {} </dev/null{out}\ncode=$?\n",
        quote(w.command)
    ));
    match w.report {
        Report::Files => {
            s.push_str("echo $code >\"$d/exit.tmp\" && mv \"$d/exit.tmp\" \"$d/exit\"\n")
        }
        Report::Log => s.push_str(LOG_END),
        Report::Streams => {}
    }
    s.push_str("exit $code\n");
    s
}

/// [`Report::Log`]'s end: the command's stderr, each line marked, then the exit code.
const LOG_END: &str =
    "awk -v p=\"${M}stderr \" '{print p $0}' \"$e\"; rm -f \"$e\"\necho \"${M}exit=$code\"\n";

/// The lines saying where the run is (`key=value`, each after `prefix`, into `to`): the host,
/// Slurm's job and node, the devices it was given, and what `nvidia-smi` says of the GPUs it
/// sees (the first one's model and driver, and how many).
fn where_lines(prefix: &str, to: &str) -> String {
    format!(
        "{{ echo \"{prefix}host=$(hostname)\"\n  [ -n \"${{SLURM_JOB_ID-}}\" ] && echo \"{prefix}job=$SLURM_JOB_ID\"\n  [ -n \"${{SLURMD_NODENAME-}}\" ] && echo \"{prefix}node=$SLURMD_NODENAME\"\n  [ -n \"${{CUDA_VISIBLE_DEVICES-}}\" ] && echo \"{prefix}devices=$CUDA_VISIBLE_DEVICES\"\n  command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader ${{CUDA_VISIBLE_DEVICES:+-i \"$CUDA_VISIBLE_DEVICES\"}} 2>/dev/null | awk -F ', *' -v p=\"{prefix}\" 'NF {{ n++; if (n == 1) {{ print p \"gpu=\" $1; if (NF > 1) print p \"driver=\" $2 }} }} END {{ if (n) print p \"gpus=\" n }}'\n}} >{to}\n"
    )
}

/// Runs `setup` once, its output where the report mode keeps it; its failure ends the run with
/// its exit status and the last lines it printed.
fn setup_lines(setup: &str, report: Report) -> String {
    let log = match report {
        Report::Files => ">\"$d/setup.log\" 2>&1",
        Report::Streams => ">&2",
        Report::Log => ">\"$e\" 2>&1",
    };
    let on_failure = match report {
        Report::Files => "; { tail -n 5 \"$d/setup.log\"; echo \"setup failed (exit status $code)\"; } >\"$d/err\"; echo $code >\"$d/exit\"",
        Report::Streams => "",
        Report::Log => "; awk -v p=\"${M}stderr \" '{print p $0}' \"$e\"; echo \"${M}exit=$code\"",
    };
    let redirect = if report == Report::Log {
        " >>\"$e\""
    } else {
        " >&2"
    };
    format!(
        "sh -c {} </dev/null {log} || {{ code=$?; echo \"setup failed (exit status $code)\"{redirect}{on_failure}; exit $code; }}\n",
        quote(setup),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Run where it is staged, the wrapper links the shared data, runs setup once, then the
    /// command with the variables, and writes where it ran and the exit code.
    #[test]
    fn the_wrapper_runs_the_command_in_the_staged_tree() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        std::fs::create_dir_all(d.join("tree")).unwrap();
        std::fs::create_dir_all(d.join("data-here")).unwrap();
        std::fs::write(d.join("data-here/x"), "7").unwrap();
        let env = vec![("A_B".to_string(), "it's".to_string())];
        let shared = vec![RemoteShared {
            name: "data/in".into(),
            path: d.join("data-here").display().to_string(),
        }];
        let text = script(&Wrapped {
            command: "cat data/in/x; echo \" $A_B\"; cat made; exit 3",
            env: &env,
            setup: Some("echo m > made"),
            shared: &shared,
            report: Report::Files,
        });
        std::fs::write(d.join("run.sh"), text).unwrap();
        let out = std::process::Command::new("sh")
            .arg(d.join("run.sh"))
            .arg(d)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "started\n");
        assert_eq!(
            std::fs::read_to_string(d.join("out")).unwrap(),
            "7 it's\nm\n"
        );
        assert_eq!(std::fs::read_to_string(d.join("exit")).unwrap(), "3\n");
        assert!(std::fs::read_to_string(d.join("where"))
            .unwrap()
            .starts_with("host="));
    }
}
