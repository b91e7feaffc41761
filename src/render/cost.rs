//! What each result cost: per researcher and in all, the agents' tokens and money per kept
//! attempt and per validated finding, and GPU-seconds (the seconds of evaluations that ran on a
//! GPU, one device each) per kept attempt. Pure functions of the state, for `status`, the page's
//! JSON and the final report.

use serde::Serialize;

use crate::model::state::State;
use crate::model::Spend;

/// One row: a researcher's (or the conference's) results and what they cost.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CostRow {
    /// `A`, … or `all`.
    pub who: String,
    pub kept: u64,
    pub validated: u64,
    pub tokens: u64,
    pub cost_usd: f64,
    pub gpu_seconds: f64,
    pub tokens_per_kept: Option<f64>,
    pub usd_per_kept: Option<f64>,
    pub tokens_per_validated: Option<f64>,
    pub usd_per_validated: Option<f64>,
    pub gpu_seconds_per_kept: Option<f64>,
}

fn row(who: &str, kept: u64, validated: u64, spend: &Spend, gpu_seconds: f64) -> CostRow {
    let per = |x: f64, n: u64| (n > 0).then(|| x / n as f64);
    let tokens = spend.tokens();
    let reported = spend.runs > 0;
    CostRow {
        who: who.to_string(),
        kept,
        validated,
        tokens,
        cost_usd: spend.cost_usd,
        gpu_seconds,
        tokens_per_kept: per(tokens as f64, kept).filter(|_| reported),
        usd_per_kept: per(spend.cost_usd, kept).filter(|_| spend.cost_usd > 0.0),
        tokens_per_validated: per(tokens as f64, validated).filter(|_| reported),
        usd_per_validated: per(spend.cost_usd, validated).filter(|_| spend.cost_usd > 0.0),
        gpu_seconds_per_kept: per(gpu_seconds, kept).filter(|_| gpu_seconds > 0.0),
    }
}

/// One row per researcher, then `all`.
pub fn rows(st: &State) -> Vec<CostRow> {
    let mut out: Vec<CostRow> = st
        .researchers
        .iter()
        .map(|(id, r)| row(id, r.counts.kept, r.validated, &r.spend, r.gpu_seconds))
        .collect();
    let kept = st.researchers.values().map(|r| r.counts.kept).sum();
    let validated = st.researchers.values().map(|r| r.validated).sum();
    let gpu = st.researchers.values().map(|r| r.gpu_seconds).sum();
    out.push(row("all", kept, validated, &st.spend, gpu));
    out
}

fn tokens(x: Option<f64>) -> String {
    x.map(|t| super::format::count(t.round() as u64))
        .unwrap_or_else(|| "-".into())
}

fn usd(x: Option<f64>) -> String {
    x.map(super::format::usd).unwrap_or_else(|| "-".into())
}

fn seconds(x: Option<f64>) -> String {
    x.map(|s| format!("{s:.0}")).unwrap_or_else(|| "-".into())
}

/// Whether anything was measured that the cost lines would show.
fn anything(all: &CostRow) -> bool {
    all.tokens > 0 || all.cost_usd > 0.0 || all.gpu_seconds > 0.0
}

/// `status` lines: the conference's cost per result, then each researcher's.
pub fn status_lines(st: &State) -> Vec<String> {
    let rows = rows(st);
    let Some(all) = rows.last().filter(|a| anything(a)) else {
        return vec![];
    };
    let line = |r: &CostRow| {
        let [kept, validated, tokens_kept, usd_kept, tokens_validated, usd_validated, gpu] =
            cells(r);
        format!(
            "{kept} kept, {validated} validated · per kept {tokens_kept} tokens {usd_kept} · per validated {tokens_validated} tokens {usd_validated} · GPU-s per kept {gpu}"
        )
    };
    let mut out = vec![format!("Per result: {}", line(all))];
    for r in &rows[..rows.len() - 1] {
        out.push(format!("  researcher {}: {}", r.who, line(r)));
    }
    out
}

/// The report's `## Cost per result` section (empty when nothing was measured).
pub fn report_section(st: &State) -> String {
    let rows = rows(st);
    if !rows.last().is_some_and(anything) {
        return String::new();
    }
    let mut s = String::from(
        "\n## Cost per result\n\nTokens and money are what the agents reported; GPU-seconds are the seconds of evaluations that ran where a GPU was found, one device each.\n\n\
         | | Kept | Validated | Tokens per kept | Cost per kept | Tokens per validated | Cost per validated | GPU-seconds per kept |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for r in &rows {
        let label = match r.who.as_str() {
            "all" => "All".to_string(),
            id => format!("Researcher {id}"),
        };
        s.push_str(&format!("| {label} | {} |\n", cells(r).join(" | ")));
    }
    s
}

/// A row's figures, written: kept, validated, tokens and cost per kept, tokens and cost per
/// validated, GPU-seconds per kept.
fn cells(r: &CostRow) -> [String; 7] {
    [
        r.kept.to_string(),
        r.validated.to_string(),
        tokens(r.tokens_per_kept),
        usd(r.usd_per_kept),
        tokens(r.tokens_per_validated),
        usd(r.usd_per_validated),
        seconds(r.gpu_seconds_per_kept),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Usage;

    #[test]
    fn cost_per_kept_and_per_validated() {
        let mut st = crate::model::state::sample();
        for r in st.researchers.values_mut() {
            r.counts = Default::default();
            r.spend = Default::default();
        }
        st.spend = Default::default();
        assert!(status_lines(&st).is_empty());
        let u = Usage {
            input: 9_000,
            output: 1_000,
            cost_usd: Some(2.0),
        };
        let r = st.researcher_mut("A");
        r.counts.kept = 4;
        r.validated = 1;
        r.spend.add(&u);
        r.gpu_seconds = 120.0;
        st.spend.add(&u);
        let rows = rows(&st);
        assert_eq!(rows[0].usd_per_kept, Some(0.5));
        assert_eq!(rows[0].usd_per_validated, Some(2.0));
        assert_eq!(rows.last().unwrap().gpu_seconds_per_kept, Some(30.0));
        let lines = status_lines(&st);
        assert_eq!(
            lines[0],
            "Per result: 4 kept, 1 validated · per kept 2.5k tokens $0.50 · per validated 10.0k tokens $2.00 · GPU-s per kept 30"
        );
        assert!(report_section(&st)
            .contains("| Researcher A | 4 | 1 | 2.5k | $0.50 | 10.0k | $2.00 | 30 |"));
    }
}
