//! What users see of a run's progress (issue #22 items 9–12): the review says which setting
//! decided its verdict, the phases say what they measure and how long they took, every attempt
//! says how long its agent and evaluation ran, and the plot tells kept from reverted readings.

use crate::common::{ConfigBuilder, TestRepo};

const NAME: &str = "seen";

/// A gain that reproduces exactly but is below Min consensus delta is challenged for being too
/// small, not called noise: the review names the setting that decided.
#[test]
fn a_reproduced_gain_below_min_consensus_delta_is_challenged_by_that_setting() {
    let repo = TestRepo::from_fixture("loop");
    let config = ConfigBuilder::new("Small", "./agents/seq.sh improve")
        .iterations(1)
        .rounds(1)
        .build()
        .replace(
            "- **Noise runs:** 1\n",
            "- **Noise runs:** 1\n- **Min consensus delta:** 2\n",
        );
    assert!(config.contains("Min consensus delta:** 2"));
    repo.start(NAME, &config).ok();
    let review = repo
        .show(
            &format!("refs/conference/{NAME}/events"),
            "round-1/peer_review_round_1.md",
        )
        .expect("the round's peer review");
    assert!(
        review.contains("does not exceed Min consensus delta (2.000000)"),
        "{review}"
    );
    assert!(!review.contains("may be noise"), "{review}");
    let reviewed = repo.events_named(NAME, "round.peer_review");
    assert!(
        reviewed[0].to_string().contains("Min consensus delta"),
        "{reviewed:?}"
    );
}
