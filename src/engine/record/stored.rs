//! Stored state is input: `state.json` arrives from refs, which a fetch, an agent or a hand edit
//! can fill with anything. Before any command uses it, its name is the one of the ref it was
//! opened by, and its counts are within what a conference can reach (the bounds conference.md is
//! held to), so a crafted file cannot send a command outside the conference's folders or make it
//! loop for ever. Its commit ids are full ids already: they are `CommitId`s, which the parse
//! refuses otherwise.

use serde_json::Value;

use crate::config::bounds::{MAX_RESEARCHERS, MAX_ROUNDS};
use crate::engine::state::State;
use crate::model::CommitId;

/// `state.json`'s bytes read and [`checked`]; the first problem otherwise, naming the field (a
/// commit id that is not a full one is named with its field, as the parse alone would not).
pub fn parse(bytes: &[u8], name: &str) -> Result<State, String> {
    checked(read(bytes)?, name)
}

/// `state.json`'s bytes read, without the bounds of [`checked`]; a commit id that is not a full
/// one is named with its field.
pub fn read(bytes: &[u8]) -> Result<State, String> {
    serde_json::from_slice::<State>(bytes)
        .map_err(|e| short_id_field(bytes).unwrap_or_else(|| e.to_string()))
}

/// The first commit id field of `bytes` that is not a full commit id, as a problem naming it.
fn short_id_field(bytes: &[u8]) -> Option<String> {
    let value: Value = serde_json::from_slice(bytes).ok()?;
    let mut fields = vec![
        ("baseline_commit".to_string(), &value["baseline_commit"]),
        ("best.commit".to_string(), &value["best"]["commit"]),
    ];
    for (id, r) in value["researchers"].as_object().into_iter().flatten() {
        fields.push((format!("researchers.{id}.head"), &r["head"]));
        fields.push((format!("researchers.{id}.round_start"), &r["round_start"]));
    }
    fields.into_iter().find_map(|(field, v)| {
        let text = v.as_str().map_or_else(|| v.to_string(), str::to_string);
        CommitId::of_field(text, &field).err()
    })
}

/// `state` checked and made to name `name` (the ref's); the first problem otherwise, naming the
/// field.
pub fn checked(mut state: State, name: &str) -> Result<State, String> {
    state.name = name.to_string();
    if u64::from(state.round) > MAX_ROUNDS {
        return Err(format!("round is {} (at most {MAX_ROUNDS})", state.round));
    }
    if state.round_bests.len() as u64 > MAX_ROUNDS + 1 {
        return Err(format!(
            "round_bests has {} entries",
            state.round_bests.len()
        ));
    }
    if state.researchers.len() as u64 > MAX_RESEARCHERS {
        return Err(format!(
            "{} researchers (at most {MAX_RESEARCHERS})",
            state.researchers.len()
        ));
    }
    for machine in state.machines.keys() {
        if !crate::remote::valid_machine_name(machine) {
            return Err(format!(
                "machine `{}` (machine names are letters, digits, - and _)",
                machine.escape_debug()
            ));
        }
    }
    for (id, r) in &state.researchers {
        if id.is_empty() || id.len() > 3 || !id.bytes().all(|b| b.is_ascii_uppercase()) {
            return Err(format!(
                "researcher id `{}` (researchers are A, B, …)",
                id.escape_debug()
            ));
        }
        if r.stuck_level > 3 {
            return Err(format!("researchers.{id}.stuck_level is {}", r.stuck_level));
        }
    }
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> State {
        let id = "a".repeat(40);
        serde_json::from_value(serde_json::json!({
            "name": "x", "status": "paused", "phase": "between", "round": 1,
            "baseline_commit": id, "baseline_metric": 1.0,
            "best": {"commit": id, "metric": 1.0, "researcher": null, "round": 1},
            "researchers": {}, "total_iterations": 0, "started_at": "", "updated_at": "",
            "started_unix": 0, "events": 1, "last_event": "", "round_bests": [],
            "plateau_rounds": 0, "high_score_rounds": 0, "final_status": null,
            "stop_reason": null, "shared_knowledge": [], "eval_settings": "",
            "transfer_done": []
        }))
        .unwrap()
    }

    #[test]
    fn the_name_is_the_refs_whatever_the_file_says() {
        let mut s = state();
        s.name = "../../elsewhere".into();
        assert_eq!(checked(s, "mine").unwrap().name, "mine");
    }

    #[test]
    fn short_ids_huge_rounds_and_odd_researchers_are_refused_by_field() {
        let mut short = serde_json::to_value(state()).unwrap();
        short["best"]["commit"] = "abc".into();
        let refused = parse(&serde_json::to_vec(&short).unwrap(), "x").unwrap_err();
        assert_eq!(refused, "best.commit is `abc`, not a full commit id");
        let mut s = state();
        s.round = 4_000_000_000;
        assert!(checked(s, "x")
            .unwrap_err()
            .starts_with("round is 4000000000"));
        let mut s = serde_json::to_value(state()).unwrap();
        s["baseline_commit"] = "b".repeat(64).into();
        let s = serde_json::from_value::<State>(s).expect("SHA-256 ids are full ids");
        assert!(checked(s, "x").is_ok());
        let mut s = state();
        let counts = serde_json::to_value(crate::engine::state::Counts::default()).unwrap();
        let r = serde_json::from_value(serde_json::json!({
            "head": "a".repeat(40), "best_metric": null, "round_start": "a".repeat(40),
            "round_start_metric": null, "round_iterations": 0, "round_finished": null,
            "counts": counts, "round_counts": counts, "consecutive_fails": 0, "stuck_level": 0,
            "attempts": 0, "last_verdict": null
        }));
        s.researchers.insert("../A".into(), r.unwrap());
        assert!(checked(s, "x").unwrap_err().contains("researcher id"));
    }
}
