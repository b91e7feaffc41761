//! What people's requests (`stop`, `answer`, `approve`) mean for the run, read from the state
//! alone: whether researchers are held, which question blocks them, whose findings a person
//! dropped. The engine asks these in the research loop, the transfer and the pause check.

use crate::model::state::State;
use crate::model::talk::OpenQuestion;
use crate::model::LoopMode;

/// Whether researchers must not start another attempt: a stop was asked for, or (human in the
/// loop) a blocking question waits for its answer.
pub fn holds_researchers(loop_mode: LoopMode, st: &State) -> bool {
    st.stop_requested || (loop_mode == LoopMode::HumanInTheLoop && blocking_question(st).is_some())
}

/// The first blocking question still open.
pub fn blocking_question(st: &State) -> Option<&OpenQuestion> {
    st.questions.iter().find(|q| q.blocking && q.is_open())
}

/// The researchers whose findings a person dropped from this round's transfer.
pub fn dropped_by_approval(st: &State) -> Vec<String> {
    (st.approvals.iter())
        .find(|a| a.round == st.round)
        .map(|a| a.dropped.clone())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::state::sample;
    use crate::model::talk::Approval;

    fn question(blocking: bool, answer: Option<&str>) -> OpenQuestion {
        OpenQuestion {
            id: "Q1".into(),
            researcher: "A".into(),
            round: 1,
            iteration: 1,
            text: "which?".into(),
            blocking,
            answer: answer.map(str::to_string),
        }
    }

    /// A stop holds researchers in every mode; an open blocking question only in human in
    /// the loop; an answered or non-blocking one never.
    #[test]
    fn what_holds_researchers() {
        use LoopMode::{Agentic, HumanInTheLoop};
        let cases = [
            (false, None, HumanInTheLoop, false),
            (true, None, Agentic, true),
            (false, Some(question(true, None)), HumanInTheLoop, true),
            (false, Some(question(true, None)), Agentic, false),
            (false, Some(question(false, None)), HumanInTheLoop, false),
            (
                false,
                Some(question(true, Some("B"))),
                HumanInTheLoop,
                false,
            ),
        ];
        for (stop, q, mode, want) in cases {
            let mut st = sample();
            st.stop_requested = stop;
            st.questions.extend(q.clone());
            assert_eq!(holds_researchers(mode, &st), want, "{stop} {q:?} {mode:?}");
        }
    }

    /// Only this round's approval drops findings.
    #[test]
    fn dropped_by_this_rounds_approval_only() {
        let mut st = sample();
        assert!(dropped_by_approval(&st).is_empty());
        st.approvals.push(Approval {
            round: 0,
            dropped: vec!["A".into()],
        });
        assert!(dropped_by_approval(&st).is_empty());
        st.approvals.push(Approval {
            round: 1,
            dropped: vec!["B".into()],
        });
        assert_eq!(dropped_by_approval(&st), vec!["B".to_string()]);
    }
}
