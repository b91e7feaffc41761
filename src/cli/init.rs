//! `init`: writes a complete, commented conference.md that validates. On a terminal it asks the
//! seed's pre-flight questions one at a time, each with a default; flags and `--yes` serve scripts.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::config::template::{render, InitAnswers};
use crate::config::{self, Direction, Strategy};
use crate::error::usage;

/// Write conference.md: asks the pre-flight questions on a terminal (count, devil's advocate,
/// unattended or pause every N rounds, partitioning, the evaluation command, the metric and its
/// direction, the agent, what researchers may change and what is frozen); use flags or --yes in
/// scripts.
#[derive(Args, Debug)]
pub struct InitArgs {
    /// Conference title (default: the repository folder's name).
    pub name: Option<String>,
    /// The file to write.
    #[arg(long, default_value = "conference.md")]
    pub config: PathBuf,
    /// Accept the defaults for every question not given as a flag.
    #[arg(long, short)]
    pub yes: bool,
    /// Overwrite an existing file.
    #[arg(long)]
    pub force: bool,
    /// Number of researchers.
    #[arg(long)]
    pub count: Option<usize>,
    /// Make the last researcher a Devil's Advocate.
    #[arg(long)]
    pub devils_advocate: Option<bool>,
    /// Pause after every N rounds (default: run unattended to the end).
    #[arg(long)]
    pub pause_every: Option<u32>,
    /// How researchers divide the search space: assigned or free.
    #[arg(long)]
    pub strategy: Option<String>,
    /// Evaluation command (prints the metric).
    #[arg(long = "eval")]
    pub eval_command: Option<String>,
    /// Agent command (or builtin:tune).
    #[arg(long)]
    pub agent: Option<String>,
    /// Files the researchers may change (Allowed changes), comma-separated: e.g. train.py
    /// (default: the files the evaluation command hands to a program, train.py in `python3
    /// train.py`).
    #[arg(long, value_delimiter = ',')]
    pub allowed: Vec<String>,
    /// The evaluation harness no candidate may change (Evaluation `frozen`): e.g. prepare.py
    /// (default: the script the evaluation command runs, eval.sh in `./eval.sh`).
    #[arg(long)]
    pub frozen: Option<String>,
    /// Metric name.
    #[arg(long)]
    pub metric: Option<String>,
    /// minimize or maximize.
    #[arg(long)]
    pub direction: Option<String>,
    /// Target value that ends the conference.
    #[arg(long)]
    pub target: Option<f64>,
    #[arg(long)]
    pub iterations_per_round: Option<u32>,
    #[arg(long)]
    pub max_rounds: Option<u32>,
}

/// Asks on the terminal; None at the end of input.
fn ask(question: &str, default: &str) -> Option<String> {
    eprint!("{question} [{default}] ");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    match std::io::stdin().read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => {
            let line = line.trim();
            Some(if line.is_empty() { default } else { line }.to_string())
        }
    }
}

/// Asks until the answer parses, saying why an answer was not taken (as a form would).
fn ask_valid<T>(question: &str, default: &str, parse: impl Fn(&str) -> Result<T>) -> Result<T> {
    loop {
        let Some(answer) = ask(question, default) else {
            crate::errln!();
            return Err(usage(format!(
                "no answer to \"{question}\" (end of input); pass it as a flag or use --yes"
            )));
        };
        match parse(&answer) {
            Ok(value) => return Ok(value),
            Err(e) => crate::errln!("  {e}; try again"),
        }
    }
}

fn parse_count(s: &str) -> Result<usize> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err(usage("the researcher count must be at least 1")),
        Ok(n) => Ok(n),
        Err(_) => Err(usage(format!(
            "`{s}` is not a whole number of researchers (e.g. 3)"
        ))),
    }
}

fn parse_yes_no(s: &str) -> Result<bool> {
    match s.trim().to_lowercase().as_str() {
        "y" | "yes" => Ok(true),
        "n" | "no" => Ok(false),
        other => Err(usage(format!("`{other}`: answer yes or no"))),
    }
}

fn parse_rounds(s: &str) -> Result<u32> {
    match s.trim().parse::<u32>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(usage(format!("`{s}` is not a whole number of rounds ≥ 1"))),
    }
}

fn parse_strategy(s: &str) -> Result<Strategy> {
    match s.trim().to_lowercase().as_str() {
        "assigned" => Ok(Strategy::Assigned),
        "free" => Ok(Strategy::Free),
        other => Err(usage(format!(
            "strategy `{other}`: write `assigned` or `free`"
        ))),
    }
}

fn parse_direction(s: &str) -> Result<Direction> {
    match s.trim().to_lowercase().as_str() {
        "minimize" | "min" | "minimise" => Ok(Direction::Minimize),
        "maximize" | "max" | "maximise" => Ok(Direction::Maximize),
        other => Err(usage(format!(
            "direction `{other}`: write `minimize` or `maximize`"
        ))),
    }
}

fn parse_text(s: &str) -> Result<String> {
    match s.trim() {
        "" => Err(usage("an answer is needed")),
        t => Ok(t.to_string()),
    }
}

/// The direction a metric's name suggests (losses, errors, times and bits per byte go down).
fn suggested_direction(metric: &str) -> &'static str {
    let m = metric.to_lowercase();
    let lower = [
        "loss",
        "err",
        "bpb",
        "perplexity",
        "ppl",
        "time",
        "latency",
        "ms",
        "seconds",
        "cost",
        "mse",
        "rmse",
        "mae",
    ];
    if lower.iter().any(|w| m.contains(w)) {
        "minimize"
    } else {
        "maximize"
    }
}

/// The evaluation command, the metric and its direction, and the agent: asked on a terminal
/// (a wrong metric or direction would optimise the wrong thing all night), flags otherwise.
fn ask_measurement(args: &InitArgs, a: &mut InitAnswers, interactive: bool) -> Result<()> {
    a.eval_command = match &args.eval_command {
        Some(e) => e.clone(),
        None if interactive => ask_valid(
            "Evaluation command: what prints the metric, run in each researcher's worktree? (e.g. python3 train.py, ./eval.sh)",
            &a.eval_command,
            parse_text,
        )?,
        None => a.eval_command.clone(),
    };
    a.metric = match &args.metric {
        Some(m) => m.clone(),
        None if interactive => ask_valid(
            "Metric name, as the evaluation prints it (`val_bpb: 0.99` → val_bpb)?",
            &a.metric,
            parse_text,
        )?,
        None => a.metric.clone(),
    };
    a.direction = match &args.direction {
        Some(d) => parse_direction(d)?,
        None if interactive => ask_valid(
            &format!(
                "Is a lower or a higher {} better? (minimize/maximize)",
                a.metric
            ),
            suggested_direction(&a.metric),
            parse_direction,
        )?,
        None => a.direction,
    };
    a.agent_command = match &args.agent {
        Some(c) => c.clone(),
        None if interactive => ask_valid(
            "Agent command: builtin:tune (tunes numeric literals, no AI service), a preset (claude, codex, aider, gemini, opencode), or any command?",
            &a.agent_command,
            parse_text,
        )?,
        None => a.agent_command.clone(),
    };
    Ok(())
}

/// The committed-or-present files the evaluation command names, split by role: the script it
/// runs directly (`./eval.sh`: the harness, frozen by default) and the files it hands to a
/// program (`python3 train.py`: in the autoresearch layout the file researchers edit, allowed
/// by default). The user's answer decides either way.
fn named_files(command: &str, top: &std::path::Path) -> (Vec<String>, Vec<String>) {
    let exists = |p: &str| top.join(p).exists();
    let direct = command
        .split_whitespace()
        .next()
        .filter(|first| first.starts_with("./"))
        .map(|first| first.trim_start_matches("./").to_string());
    crate::config::paths::command_files(command, &exists)
        .into_iter()
        .partition(|f| direct.as_deref() == Some(f.as_str()))
}

/// A comma-separated list of paths; `none` (or nothing) is the empty list.
fn parse_paths(s: &str) -> Result<Vec<String>> {
    let items: Vec<String> = s
        .split(',')
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect();
    if items.len() == 1 && items[0].eq_ignore_ascii_case("none") {
        return Ok(Vec::new());
    }
    Ok(items)
}

/// What researchers may change (Allowed changes) and the harness they may not (Evaluation
/// `frozen`): asked on a terminal, offering the files the evaluation command names, because
/// with Allowed changes empty a file the command names is frozen and everything else open.
fn ask_search_space(
    args: &InitArgs,
    a: &mut InitAnswers,
    interactive: bool,
    top: &std::path::Path,
) -> Result<()> {
    let (harness, mut handed) = named_files(&a.eval_command, top);
    let given_frozen = parse_paths(args.frozen.as_deref().unwrap_or(""))?;
    handed.retain(|f| !given_frozen.contains(f));
    let or_none = |v: &[String]| {
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join(", ")
        }
    };
    if args.allowed.is_empty() {
        a.allowed = if interactive {
            ask_valid(
                "Which files may the researchers change (Allowed changes)? Paths or globs, comma-separated (e.g. train.py, src/**); none = every file that is not frozen",
                &or_none(&handed),
                parse_paths,
            )?
        } else {
            handed
        };
    }
    if args.frozen.is_none() {
        let allowed = a.allowed.clone();
        let frozen = if interactive {
            ask_valid(
                "Which files are the evaluation harness, that no candidate may change (frozen)? Comma-separated (e.g. prepare.py, data/**); none = only the files the evaluation command names that are not allowed",
                &or_none(&harness),
                |answer| {
                    let paths = parse_paths(answer)?;
                    match paths.iter().find(|p| allowed.contains(p)) {
                        Some(p) => Err(usage(format!(
                            "`{p}` is in Allowed changes too: a file is either changed or frozen"
                        ))),
                        None => Ok(paths),
                    }
                },
            )?
        } else {
            harness
        };
        a.frozen = (!frozen.is_empty()).then(|| frozen.join(", "));
    }
    Ok(())
}

pub fn run(args: InitArgs) -> Result<i32> {
    let repo = super::discover()?;
    let top = crate::engine::run::settings::workdir(&repo)?;
    let path = if args.config.is_absolute() {
        args.config.clone()
    } else {
        top.join(&args.config)
    };
    if path.exists() && !args.force {
        return Err(usage(format!(
            "{} already exists; pass --force to overwrite it",
            path.display()
        )));
    }
    let mut a = InitAnswers {
        title: args.name.clone().unwrap_or_else(|| {
            top.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "My conference".into())
        }),
        allowed: args
            .allowed
            .iter()
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty())
            .collect(),
        frozen: args.frozen.clone(),
        ..InitAnswers::default()
    };
    let interactive = !args.yes && super::stdin_is_tty();
    a.count = match args.count {
        Some(c) => parse_count(&c.to_string())?,
        None if interactive => ask_valid("How many researchers should participate? (1 = the classic autoresearch loop; 2-3 recommended)", "3", parse_count)?,
        None => a.count,
    };
    a.devils_advocate = match args.devils_advocate {
        Some(d) => d,
        None if interactive && a.count >= 2 => ask_valid(
            "Should one researcher be a Devil's Advocate, pursuing contrarian strategies? (yes/no)",
            "no",
            parse_yes_no,
        )?,
        None => false,
    };
    match args.pause_every {
        Some(n) => {
            a.unattended = false;
            a.pause_every = Some(n);
        }
        None if interactive => {
            let unattended = ask_valid(
                "Run unattended (overnight) to the end? (yes/no; no = pause every N rounds)",
                "yes",
                parse_yes_no,
            )?;
            if !unattended {
                a.unattended = false;
                a.pause_every = Some(ask_valid(
                    "Pause after every how many rounds?",
                    "1",
                    parse_rounds,
                )?);
            }
        }
        None => {}
    }
    a.strategy = match &args.strategy {
        Some(s) => parse_strategy(s)?,
        None if interactive && a.count >= 2 => ask_valid("How should researchers divide the search space? (assigned = each gets a focus; free = overlap allowed)", "free", parse_strategy)?,
        None => Strategy::Free,
    };
    ask_measurement(&args, &mut a, interactive)?;
    ask_search_space(&args, &mut a, interactive, &top)?;
    if args.target.is_some() {
        a.target = args.target;
    }
    if let Some(i) = args.iterations_per_round {
        a.iterations_per_round = i;
    }
    if let Some(r) = args.max_rounds {
        a.max_rounds = r;
    }
    let text = render(&a);
    if let Err(errs) = config::load(&text) {
        anyhow::bail!(
            "internal error: the generated conference.md does not validate:\n{}",
            errs.iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    std::fs::write(&path, &text)?;
    crate::outln!("Wrote {} ({} researchers, {} partitioning). Edit the Goal, Success Metric and Evaluation sections, commit your evaluation harness, then run `git conference start`.",
        path.display(), a.count, if a.strategy == Strategy::Assigned { "assigned" } else { "free" });
    Ok(0)
}
