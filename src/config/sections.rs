//! The layout of conference.md: which sections exist, which keys each holds (with their aliases,
//! whether a key is a list, and the example line an error shows), and how a written heading or
//! key name is matched to them. `parse` reads a file against this table; `validate` checks values.

use super::keys::Key;

/// The sections conference.md may hold: the seed template's, in its order, plus Evaluation and Agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SectionKind {
    Goal,
    Mode,
    SuccessMetric,
    SuccessCriteria,
    Researchers,
    PreFlightGate,
    SearchSpace,
    Partitioning,
    Guard,
    NoiseHandling,
    Constraints,
    CurrentApproach,
    SharedKnowledge,
    Context,
    ConferenceLog,
    Evaluation,
    Agent,
    /// How worktrees are prepared and where evaluations run (see `config::environment`).
    Environment,
}

/// How a section's body is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// Prose kept as text; only the section's own keys (if any) are read as settings.
    Text,
    /// `key: value` lines; anything else is an error.
    Settings,
    /// One item per line (bullet markers removed).
    Bullets,
    /// Maintained by the conference (the log table); not configuration.
    Ignored,
}

/// One key a settings section accepts.
#[derive(Debug)]
pub struct KeySpec {
    /// The key as the template writes it (`Iterations per round`).
    pub name: &'static str,
    /// Other spellings accepted (compared after normalisation).
    pub aliases: &'static [&'static str],
    /// Followed by a bullet list of items (`**Allowed changes:**`).
    pub list: bool,
    /// An example line to write, used in hints.
    pub example: &'static str,
}

#[derive(Debug)]
pub struct SectionSpec {
    pub kind: SectionKind,
    /// The heading as the template writes it.
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    pub body: Body,
    pub keys: &'static [KeySpec],
}

const fn key(
    name: &'static str,
    aliases: &'static [&'static str],
    example: &'static str,
) -> KeySpec {
    KeySpec {
        name,
        aliases,
        list: false,
        example,
    }
}

const fn list_key(
    name: &'static str,
    aliases: &'static [&'static str],
    example: &'static str,
) -> KeySpec {
    KeySpec {
        name,
        aliases,
        list: true,
        example,
    }
}

/// Every known section, in the template's order (Evaluation and Agent last).
pub static SECTIONS: &[SectionSpec] = &[
    SectionSpec {
        kind: SectionKind::Goal,
        name: "Goal",
        aliases: &[],
        body: Body::Text,
        keys: &[key(
            "Brief",
            &["brief file", "program file"],
            "- brief: program.md",
        )],
    },
    SectionSpec {
        kind: SectionKind::Mode,
        name: "Mode",
        aliases: &[],
        body: Body::Text,
        keys: &[key("Mode", &[], "- **Mode:** metric")],
    },
    SectionSpec {
        kind: SectionKind::SuccessMetric,
        name: "Success Metric",
        aliases: &["Metric"],
        body: Body::Settings,
        keys: &[
            key(
                "Metric",
                &["name", "metric name"],
                "- **Metric:** median_ms",
            ),
            key("Target", &["target value"], "- **Target:** 40   (or: none)"),
            key(
                "Direction",
                &[],
                "- **Direction:** minimize   (or: maximize)",
            ),
        ],
    },
    SectionSpec {
        kind: SectionKind::SuccessCriteria,
        name: "Success Criteria",
        aliases: &["Criteria"],
        body: Body::Text,
        keys: &[],
    },
    SectionSpec {
        kind: SectionKind::Researchers,
        name: "Researchers",
        aliases: &[],
        body: Body::Settings,
        keys: &[
            key(
                "Count",
                &["researcher count", "researchers", "number of researchers"],
                "- **Count:** 3",
            ),
            key(
                Key::IterationsPerRound.name(),
                &["iterations"],
                "- **Iterations per round:** 5",
            ),
            key(Key::MaxRounds.name(), &["rounds"], "- **Max rounds:** 4"),
            key(
                "Mode",
                &["loop mode"],
                "- **Mode:** agentic   (or: human-in-the-loop)",
            ),
            key(
                "Branching",
                &["branches", "tree search"],
                "- **Branching:** best-first   (or: off, agent-decided)",
            ),
            key(
                "Max alive branches",
                &["alive branches", "max branches"],
                "- **Max alive branches:** 3",
            ),
            key(
                "Parameter sweep",
                &["sweep", "sweeps", "parameter sweeps"],
                "- **Parameter sweep:** on   (or: off)",
            ),
        ],
    },
    SectionSpec {
        kind: SectionKind::PreFlightGate,
        name: "Pre-Flight Gate",
        aliases: &["Pre-Flight", "Preflight Gate", "Pre-Flight Checklist"],
        body: Body::Settings,
        keys: &[
            key(
                Key::ResearcherCount.name(),
                &["count", "researchers", "number of researchers"],
                "- **Researcher count:** 3",
            ),
            key(
                Key::IterationsPerRound.name(),
                &["iterations"],
                "- **Iterations per round:** 5",
            ),
            key(Key::MaxRounds.name(), &["rounds"], "- **Max rounds:** 4"),
            key(
                Key::MaxTotalIterations.name(),
                &["total iterations"],
                "- **Max total iterations:** 60",
            ),
            key(
                Key::SuccessDefinition.name(),
                &["success"],
                "- **Success definition:** median_ms <= 40",
            ),
            key(
                "Critic / Devil's Advocate",
                &["devil's advocate", "devils advocate", "critic"],
                "- **Critic / Devil's Advocate:** enabled   (or: disabled, ask user before run)",
            ),
            key(
                "Unattended",
                &["overnight", "run unattended"],
                "- **Unattended:** yes   (or: no)",
            ),
            key(
                Key::PauseEvery.name(),
                &["pause"],
                "- **Pause every:** never   (or a number of rounds: 2)",
            ),
            key(
                "Partitioning",
                &["strategy", "search space partitioning"],
                "- **Partitioning:** assigned   (or: free)",
            ),
            key(
                "Final confirmation",
                &["confirmation", "confirmed"],
                "- **Final confirmation:** confirmed",
            ),
        ],
    },
    SectionSpec {
        kind: SectionKind::SearchSpace,
        name: "Search Space",
        aliases: &[],
        body: Body::Settings,
        keys: &[
            list_key(
                "Allowed changes",
                &["allowed"],
                "**Allowed changes:**   (then one bullet per path or rule: - src/**)",
            ),
            list_key(
                "Forbidden changes",
                &["forbidden"],
                "**Forbidden changes:**   (then one bullet per path or rule: - tests/**)",
            ),
        ],
    },
    SectionSpec {
        kind: SectionKind::Partitioning,
        name: "Search Space Partitioning",
        aliases: &["Partitioning"],
        body: Body::Settings,
        keys: &[key(
            "Strategy",
            &["partitioning"],
            "**Strategy:** assigned   (or: free)",
        )],
    },
    SectionSpec {
        kind: SectionKind::Guard,
        name: "Guard",
        aliases: &["Guards"],
        body: Body::Bullets,
        keys: &[],
    },
    SectionSpec {
        kind: SectionKind::NoiseHandling,
        name: "Noise Handling",
        aliases: &["Noise"],
        body: Body::Settings,
        keys: &[
            key(Key::NoiseRuns.name(), &["runs"], "- **Noise runs:** 3"),
            key(
                "Min consensus delta",
                &["consensus delta", "min delta", "minimum consensus delta"],
                "- **Min consensus delta:** 1%   (or an absolute value: 0.02)",
            ),
        ],
    },
    SectionSpec {
        kind: SectionKind::Constraints,
        name: "Constraints",
        aliases: &["Budget", "Budgets"],
        body: Body::Settings,
        keys: &[
            key(
                Key::MaxTotalIterations.name(),
                &["total iterations"],
                "- **Max total iterations:** 60",
            ),
            key(Key::TimeBudget.name(), &[], "- **Time budget:** 2h   (or: none)"),
            key(
                Key::TokenBudget.name(),
                &["tokens budget", "max tokens"],
                "- **Token budget:** 2M tokens   (or: none)",
            ),
            key(
                Key::CostBudget.name(),
                &["cost limit", "max cost", "budget usd"],
                "- **Cost budget:** $20   (or: none)",
            ),
            key(
                Key::ResearcherTimeout.name(),
                &[],
                "- **Researcher timeout:** 30m   (or: none)",
            ),
            key(
                Key::PauseEvery.name(),
                &["pause"],
                "- **Pause every:** never   (or a number of rounds: 2)",
            ),
            key(
                "Lease",
                &["lease time", "machine lease"],
                "- **Lease:** 30s   (several machines: how long a silent machine keeps its researchers)",
            ),
            key(
                "Stall rounds",
                &["stall", "stalled rounds", "stall after"],
                "- **Stall rounds:** 2   (or: never)",
            ),
        ],
    },
    SectionSpec {
        kind: SectionKind::CurrentApproach,
        name: "Current Approach",
        aliases: &["Baseline"],
        body: Body::Text,
        keys: &[],
    },
    SectionSpec {
        kind: SectionKind::SharedKnowledge,
        name: "Shared Knowledge",
        aliases: &[],
        body: Body::Bullets,
        keys: &[],
    },
    SectionSpec {
        kind: SectionKind::Context,
        name: "Context & References",
        aliases: &["Context and References", "Context", "References"],
        body: Body::Text,
        keys: &[],
    },
    SectionSpec {
        kind: SectionKind::ConferenceLog,
        name: "Conference Log",
        aliases: &["Log"],
        body: Body::Ignored,
        keys: &[],
    },
    SectionSpec {
        kind: SectionKind::Evaluation,
        name: "Evaluation",
        aliases: &["Evaluator"],
        body: Body::Settings,
        keys: &[
            key("command", &["cmd", "eval command"], "- command: ./eval.sh"),
            key("timeout", &[], "- timeout: 5m"),
            key("repeats", &["runs"], "- repeats: 1"),
            list_key("frozen", &["frozen paths"], "- frozen: eval.sh, data/**"),
            key(
                "holdout",
                &["holdout command"],
                "- holdout: ./eval.sh --holdout",
            ),
            key("judge", &["judge command"], "- judge: ./judge.sh"),
            key(
                "metric from",
                &["metric source", "read metric"],
                "- metric from: name   (or: last number)",
            ),
            key(
                "prune",
                &["pruning"],
                "- prune: on   (or: early, or off, the default)",
            ),
            key(
                "prune warmup",
                &["pruning warmup", "prune after", "warmup"],
                "- prune warmup: 2   (intermediate readings before any pruning decision)",
            ),
            key(
                "hardware",
                &["hardware class"],
                "- hardware: same   (or: any, the default)",
            ),
        ],
    },
    SectionSpec {
        kind: SectionKind::Agent,
        name: "Agent",
        aliases: &["Agents"],
        body: Body::Settings,
        keys: &[
            key("command", &["cmd"], "- command: builtin:tune"),
            key("timeout", &["agent timeout"], "- timeout: 30m"),
            key("seed", &[], "- seed: 0"),
            key("sweep", &["batch", "batch size"], "- sweep: 4"),
            key(
                "max turns",
                &["turn limit", "max-turns", "turns"],
                "- max turns: 30",
            ),
            key(
                "extra args",
                &["args", "arguments", "extra arguments"],
                "- extra args: --verbose",
            ),
            key("chair", &["chair command"], "- chair: ./prose.sh chair"),
            key(
                "reviewer",
                &["reviewer command"],
                "- reviewer: ./prose.sh reviewer",
            ),
            key(
                "synthesizer",
                &["synthesizer command"],
                "- synthesizer: ./prose.sh synthesizer",
            ),
            key(
                "retrospective",
                &["retrospective command"],
                "- retrospective: ./prose.sh retrospective",
            ),
            key(
                "model",
                &["model name", "agent model"],
                "- model: gpt-4o-mini   (with a preset: - model: claude-sonnet-4-5)",
            ),
            key(
                "base url",
                &["api base", "api base url", "endpoint"],
                "- base url: http://127.0.0.1:8000/v1",
            ),
            key(
                "api key env",
                &["api key variable", "api key env var"],
                "- api key env: OPENAI_API_KEY",
            ),
        ],
    },
    SectionSpec {
        kind: SectionKind::Environment,
        name: "Environment",
        aliases: &["Worktrees", "Machine"],
        body: Body::Settings,
        keys: ENVIRONMENT_KEYS,
    },
];

/// The spec of a section kind.
pub fn spec(kind: SectionKind) -> &'static SectionSpec {
    SECTIONS
        .iter()
        .find(|s| s.kind == kind)
        .expect("every SectionKind has a spec")
}

/// The key spec of `name` (the template's spelling) in `kind`'s section.
pub fn key_spec(kind: SectionKind, name: &str) -> &'static KeySpec {
    spec(kind)
        .keys
        .iter()
        .find(|k| k.name == name)
        .unwrap_or_else(|| panic!("no key {name:?} in section {kind:?}"))
}

/// Lower-case letters and digits only: `Iterations per round`, `iterations_per_round` and
/// `Iterations-Per-Round` compare equal, as do `Critic / Devil's Advocate` and `critic devils advocate`.
pub fn normalize(name: &str) -> String {
    name.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

/// The section a `## Heading` names, if known.
pub fn section_kind(heading: &str) -> Option<SectionKind> {
    let n = normalize(heading);
    SECTIONS
        .iter()
        .find(|s| normalize(s.name) == n || s.aliases.iter().any(|a| normalize(a) == n))
        .map(|s| s.kind)
}

pub(super) fn find_key(spec: &SectionSpec, written: &str) -> Option<&'static KeySpec> {
    let n = normalize(written);
    let keys: &'static [KeySpec] = spec.keys;
    keys.iter()
        .find(|k| normalize(k.name) == n || k.aliases.iter().any(|a| normalize(a) == n))
}

/// The section whose key `written` is (by name, not alias), when it is another section's key.
pub(super) fn elsewhere(written: &str) -> Option<(&'static SectionSpec, &'static KeySpec)> {
    let n = normalize(written);
    SECTIONS.iter().find_map(|spec| {
        let key = spec.keys.iter().find(|k| normalize(k.name) == n)?;
        Some((spec, key))
    })
}

/// The keys of `## Environment`.
static ENVIRONMENT_KEYS: &[KeySpec] = &[
    KeySpec {
        name: "setup",
        aliases: &["setup command"],
        list: false,
        example: "- setup: uv sync --frozen",
    },
    KeySpec {
        name: "setup timeout",
        aliases: &[],
        list: false,
        example: "- setup timeout: 30m",
    },
    KeySpec {
        name: "shared",
        aliases: &["shared paths"],
        list: true,
        example: "- shared: data/, .venv",
    },
    KeySpec {
        name: "devices",
        aliases: &["device", "gpus"],
        list: false,
        example: "- devices: 0,1,2,3",
    },
    KeySpec {
        name: "max parallel evaluations",
        aliases: &["parallel evaluations", "max concurrent evaluations"],
        list: false,
        example: "- max parallel evaluations: 1",
    },
    // Where evaluations run: read by `config::launcher`.
    KeySpec {
        name: "launcher",
        aliases: &[],
        list: false,
        example: "- launcher: slurm",
    },
    KeySpec {
        name: "slurm args",
        aliases: &["sbatch args"],
        list: false,
        example: "- slurm args: --partition=gpu --gres=gpu:1 --time=00:20:00",
    },
    KeySpec {
        name: "hosts",
        aliases: &[],
        list: true,
        example: "- hosts: gpu1, gpu2:/scratch/conf, user@10.0.0.7",
    },
    KeySpec {
        name: "launch",
        aliases: &["launch command"],
        list: false,
        example: "- launch: sky exec mycluster --workdir {dir} -- {command}",
    },
    KeySpec {
        name: "staging",
        aliases: &[],
        list: false,
        example: "- staging: /shared/scratch/conference",
    },
    KeySpec {
        name: "remote shared",
        aliases: &[],
        list: true,
        example: "- remote shared: data=/datasets/x",
    },
    KeySpec {
        name: "queue timeout",
        aliases: &[],
        list: false,
        example: "- queue timeout: 2h",
    },
    KeySpec {
        name: "ssh command",
        aliases: &[],
        list: false,
        example: "- ssh command: ssh -F ~/conf/ssh_config",
    },
    KeySpec {
        name: "ray address",
        aliases: &[],
        list: false,
        example: "- ray address: http://head.example:8265",
    },
    KeySpec {
        name: "ray resources",
        aliases: &[],
        list: false,
        example: "- ray resources: gpus=1, cpus=4, memory=16G",
    },
    KeySpec {
        name: "ray runtime env",
        aliases: &[],
        list: false,
        example: "- ray runtime env: {\"pip\": [\"torch==2.5.1\"]}",
    }, // Where attempts are also sent: read by `config::tracker`.
    KeySpec {
        name: "mlflow",
        aliases: &["mlflow tracking uri"],
        list: false,
        example: "- mlflow: http://127.0.0.1:5000",
    },
    KeySpec {
        name: "mlflow experiment",
        aliases: &[],
        list: false,
        example: "- mlflow experiment: nanogpt-search",
    },
];
