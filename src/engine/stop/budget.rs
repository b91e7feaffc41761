//! The ledger of what the agents used, and the token and cost budgets it enforces.
//!
//! Every attempt records the usage its agent reported (`tokens`, `cost_usd` in the iteration
//! event and the note); the state sums it per conference, per researcher and per round, so
//! `status` reads it from one blob and a budget check costs nothing. No agent run starts once
//! `Token budget` or `Cost budget` is reached (`researcher_loop` finishes the researcher's
//! round; the stop rules then end the conference with `token_budget` / `cost_budget`). A CLI
//! with a native cap (Claude Code's `--max-budget-usd`) gets this researcher's share of what is
//! left, so one run cannot overshoot by much either.

use crate::agents::Kind;
use crate::agents::Preset;
use crate::config::keys::Key;
use crate::config::Config;
use crate::engine::state::State;
use crate::engine::Conference;

/// An attempt's tokens (as notes and events have them: `{"input": N, "output": M}`), and the
/// spend the state sums from them.
pub use crate::model::{Spend, Tokens};

impl Spend {
    /// `1.2M tokens (in 1.1M, out 95k), $3.21 over 14 runs`; `none reported`.
    pub fn describe(&self) -> String {
        if self.runs == 0 {
            return "none reported".into();
        }
        let cost = if self.cost_usd > 0.0 {
            format!(", {}", usd(self.cost_usd))
        } else {
            String::new()
        };
        format!(
            "{} tokens (in {}, out {}){cost} over {} agent run{}",
            count(self.tokens()),
            count(self.input),
            count(self.output),
            self.runs,
            if self.runs == 1 { "" } else { "s" }
        )
    }
}

pub use crate::render::format::{count, usd};

/// The budget that is used up, as a stop token and a sentence, if one is.
pub fn used_up(config: &Config, st: &State) -> Option<(&'static str, String)> {
    if let Some(max) = config.token_budget {
        if st.spend.tokens() >= max {
            return Some((
                "token_budget",
                format!(
                    "token_budget ({} tokens) reached: {} used",
                    count(max),
                    count(st.spend.tokens())
                ),
            ));
        }
    }
    if let (Some(share), true) = (config.cost_budget, config.cost_budget_per_researcher) {
        let spent = |r: &crate::engine::state::ResearcherState| r.spend.cost_usd >= share;
        if !st.researchers.is_empty() && st.researchers.values().all(spent) {
            return Some((
                "cost_budget",
                format!(
                    "cost_budget ({} per researcher) reached by every researcher: {} spent",
                    usd(share),
                    usd(st.spend.cost_usd)
                ),
            ));
        }
    } else if let Some(max) = config.cost_budget {
        if st.spend.cost_usd >= max {
            return Some((
                "cost_budget",
                format!(
                    "cost_budget ({}) reached: {} spent",
                    usd(max),
                    usd(st.spend.cost_usd)
                ),
            ));
        }
    }
    None
}

/// What one agent run may still spend (for a CLI's native cap): what is left of the cost
/// budget, shared among the researchers that run at once; with a budget per researcher, what
/// is left of `researcher`'s share.
pub fn run_allowance_usd(conf: &Conference, st: &State, researcher: &str) -> Option<f64> {
    let max = conf.config.cost_budget?;
    if conf.config.cost_budget_per_researcher {
        let spent = st
            .researchers
            .get(researcher)
            .map_or(0.0, |r| r.spend.cost_usd);
        return Some((max - spent).max(0.0));
    }
    let left = (max - st.spend.cost_usd).max(0.0);
    Some(left / conf.config.count.max(1) as f64)
}

/// Why `researcher` takes no more iterations when it has spent its share of a `Cost budget`
/// given per researcher (the others go on).
pub fn share_used_up(config: &Config, st: &State, researcher: &str) -> Option<String> {
    let share = config
        .cost_budget
        .filter(|_| config.cost_budget_per_researcher)?;
    let spent = st.researchers.get(researcher)?.spend.cost_usd;
    (spent >= share).then(|| {
        format!(
            "cost budget: researcher {researcher} spent {} of its {} share",
            usd(spent),
            usd(share)
        )
    })
}

/// Warnings for `start`: a budget the agent cannot be held to, because it reports no usage
/// (or no cost).
pub fn warnings(config: &Config) -> Vec<String> {
    let command = config.agent.command.trim();
    let preset = config.agent.preset().map(|(p, _)| p);
    let reporting = crate::agents::reporting_clis(command);
    let reports_tokens = !reporting.is_empty() || config.agent.kind() == Kind::OpenAi;
    let reports_cost = reporting.iter().any(|p| p.reports_cost());
    let mut out = Vec::new();
    let who = match preset {
        Some(p) => p.product().to_string(),
        None => format!("`{command}`"),
    };
    // A wrapper script may print a known CLI's report all the same: it is read when it does.
    let unless = if preset.is_none() && reporting.is_empty() {
        " unless its output is a known CLI's report"
    } else {
        ""
    };
    if config.token_budget.is_some() && !reports_tokens {
        out.push(format!(
            "Token budget is set, but the agent {who} reports no usage{unless}: it cannot be \
             enforced (use a preset such as `claude`, or builtin:openai)"
        ));
    }
    if config.cost_budget.is_some() && !reports_cost {
        out.push(format!(
            "Cost budget is set, but the agent {who} reports no cost{unless}: it cannot be \
             enforced (Claude Code, aider and opencode report one)"
        ));
    } else if config.cost_budget.is_some() && reporting.contains(&Preset::Aider) {
        out.push(
            "Cost budget with aider: aider reports a cost only for models whose prices it \
             knows; runs without one count as free"
                .into(),
        );
    }
    out
}

/// `status` lines: the budgets (with what is used of them) and the spend.
pub fn status_lines(config: &Config, st: &State) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(max) = config.token_budget {
        lines.push(format!(
            "Tokens:     {} of {} (Token budget)",
            count(st.spend.tokens()),
            count(max)
        ));
    }
    if let Some(max) = config.cost_budget {
        lines.push(match config.cost_budget_per_researcher {
            true => format!(
                "Cost:       {} of {} per researcher (Cost budget): {}",
                usd(st.spend.cost_usd),
                usd(max),
                (st.researchers.iter())
                    .map(|(id, r)| format!("{id} {}", usd(r.spend.cost_usd)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            false => format!(
                "Cost:       {} of {} (Cost budget)",
                usd(st.spend.cost_usd),
                usd(max)
            ),
        });
    }
    lines.extend(spend_lines(st));
    lines
}

/// One budget as `status` shows it: its name, what is left of it as words, and the running
/// seconds it would last at the pace so far (None: no pace yet).
struct Left {
    name: &'static str,
    text: String,
    lasts: Option<f64>,
}

/// Each budget that is set, with what is left of it after `running` seconds of running time.
fn budgets_left(config: &Config, st: &State, running: f64) -> Vec<Left> {
    use crate::render::format::seconds_text;
    // How long `left` more units last, at the pace `done` units took `running` seconds.
    let pace = |done: f64, left: f64| (done > 0.0).then(|| left * running / done);
    let mut out = Vec::new();
    if let Some(max) = config.time_budget {
        let left = (max.as_secs_f64() - running).max(0.0);
        out.push(Left {
            name: Key::TimeBudget.name(),
            text: format!(
                "time {} of {}",
                seconds_text(left),
                crate::config::duration::format_duration(max)
            ),
            lasts: Some(left),
        });
    }
    if let Some(max) = config.max_total_iterations {
        let left = (max as u64).saturating_sub(st.total_iterations);
        out.push(Left {
            name: Key::MaxTotalIterations.name(),
            text: format!("iterations {left} of {max}"),
            lasts: pace(st.total_iterations as f64, left as f64),
        });
    }
    let rounds_done = st.round_bests.len() as f64;
    let rounds_left = config
        .max_rounds
        .saturating_sub(st.round_bests.len() as u32);
    out.push(Left {
        name: Key::MaxRounds.name(),
        text: format!("rounds {rounds_left} of {}", config.max_rounds),
        lasts: pace(rounds_done, rounds_left as f64),
    });
    if let Some(max) = config.token_budget {
        let used = st.spend.tokens();
        out.push(Left {
            name: Key::TokenBudget.name(),
            text: format!(
                "tokens {} of {}",
                count(max.saturating_sub(used)),
                count(max)
            ),
            lasts: pace(used as f64, max.saturating_sub(used) as f64),
        });
    }
    if let Some(max) = config.cost_budget {
        let left = (max - st.spend.cost_usd).max(0.0);
        out.push(Left {
            name: Key::CostBudget.name(),
            text: format!("cost {} of {}", usd(left), usd(max)),
            lasts: pace(st.spend.cost_usd, left),
        });
    }
    out
}

/// `status` lines on time: the conference's running time (pauses and stops never count), and
/// while it is not done, what is left of each budget and when the first of them would end it
/// at the pace so far.
pub fn running_lines(config: &Config, st: &State, running: f64) -> Vec<String> {
    use crate::render::format::seconds_text;
    let mut lines = vec![format!(
        "Running:    {} of running time (pauses and stops not counted)",
        seconds_text(running)
    )];
    if st.phase == crate::model::state::Phase::Done {
        return lines;
    }
    let left = budgets_left(config, st, running);
    lines.push(format!(
        "Left:       {}",
        left.iter()
            .map(|l| l.text.as_str())
            .collect::<Vec<_>>()
            .join(" · ")
    ));
    let first = left
        .iter()
        .filter_map(|l| l.lasts.map(|s| (s, l.name)))
        .min_by(|a, b| a.0.total_cmp(&b.0));
    if let Some((seconds, name)) = first {
        lines.push(format!(
            "Ends:       in about {} of running time ({name}, at the pace so far)",
            seconds_text(seconds)
        ));
    }
    lines
}

/// The report's `## Agent spend` section (empty when no agent reported usage): the total with
/// the budgets, then a table per researcher and per round.
pub fn report_section(config: &Config, st: &State) -> String {
    if st.spend.runs == 0 {
        return String::new();
    }
    let mut s = format!("\n## Agent spend\n\nIn all: {}.", st.spend.describe());
    if let Some(max) = config.token_budget {
        s.push_str(&format!(" Token budget: {} tokens.", count(max)));
    }
    if let Some(max) = config.cost_budget {
        s.push_str(&format!(" Cost budget: {}.", usd(max)));
    }
    s.push_str(
        "\n\n| | Agent runs | Input tokens | Output tokens | Cost |\n|---|---|---|---|---|\n",
    );
    let row = |label: String, sp: &Spend| {
        format!(
            "| {label} | {} | {} | {} | {} |\n",
            sp.runs,
            sp.input,
            sp.output,
            if sp.cost_usd > 0.0 {
                usd(sp.cost_usd)
            } else {
                "-".into()
            }
        )
    };
    for (id, r) in &st.researchers {
        s.push_str(&row(format!("Researcher {id}"), &r.spend));
    }
    for (i, sp) in st.round_spend.iter().enumerate() {
        s.push_str(&row(format!("Round {}", i + 1), sp));
    }
    s
}

/// Spend lines for `status` and the report: the total, per researcher, per round.
pub fn spend_lines(st: &State) -> Vec<String> {
    if st.spend.runs == 0 {
        return vec![];
    }
    let mut lines = vec![format!("Spend:      {}", st.spend.describe())];
    for (id, r) in &st.researchers {
        if r.spend.runs > 0 {
            lines.push(format!("  researcher {id}: {}", r.spend.describe()));
        }
    }
    for (i, s) in st.round_spend.iter().enumerate() {
        if s.runs > 0 {
            lines.push(format!("  round {}: {}", i + 1, s.describe()));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::agent_settings_tests::conference;
    use crate::model::Usage;

    #[test]
    fn describes_spend() {
        let mut s = Spend::default();
        assert_eq!(s.describe(), "none reported");
        s.add(&Usage {
            input: 1_150_000,
            output: 95_000,
            cost_usd: Some(3.2149),
        });
        assert_eq!(
            s.describe(),
            "1.25M tokens (in 1.15M, out 95.0k), $3.21 over 1 agent run"
        );
        assert_eq!(usd(0.0075), "$0.0075");
        assert_eq!(count(950), "950");
    }

    #[test]
    fn budgets_without_usage_are_warned_about() {
        let c = crate::config::load(&conference("./agent.sh", "1M", "$5", &[])).unwrap();
        let w = warnings(&c);
        assert_eq!(w.len(), 2, "{w:?}");
        let c = crate::config::load(&conference("claude", "1M", "$5", &[])).unwrap();
        assert!(warnings(&c).is_empty());
        let c = crate::config::load(&conference("codex", "1M", "$5", &[])).unwrap();
        let w = warnings(&c);
        assert!(w.len() == 1 && w[0].contains("reports no cost"), "{w:?}");
    }
}
