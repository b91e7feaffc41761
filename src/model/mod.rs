//! The protocol's data at the bottom of the crate (no I/O, no engine): the typed events
//! (`event.rs`), the state every event updates (`state.rs`), what agent runs used (`usage.rs`),
//! how a failure's reason is worded (`reasons.rs`), what a researcher's prompt is made of
//! (`briefing.rs`), and the words stored in events, notes and
//! `state.json`, as enums. Each word is spelled once, in `words.rs`; a new
//! verdict is added there and the compiler finds every `match` that must handle it.
//!
//! Stored records hold a word as `Word<T>`: `Known(T)`, or `Other(String)` for a word this
//! release does not know (a newer release's), kept as written; the enums compare with it
//! (`attempt.verdict == Verdict::Kept`), so reading never fails on a word and writing always
//! spells it the one way.

pub mod briefing;
mod commit_id;
pub mod event;
pub mod knowledge;
pub mod notes;
pub mod placement;
pub mod reasons;
mod records;
pub mod seed;
mod settings;
pub mod state;
pub mod sweep;
pub mod talk;
pub mod tree;
mod usage;
mod words;

pub use commit_id::{printed_id, short_id, short_oid, CommitId, NotACommitId};
pub use event::{Event, EventLine, Note};
pub use placement::Placement;
pub use records::{
    mixed_gpu_models, mixed_gpu_warning, readings_by_class, AttemptRecord, Conflict, Finding,
    PickRecord, Pruned,
};
pub use settings::{Direction, LoopMode, Tolerance};
pub use usage::{Spend, Tokens, Usage};
pub use words::{
    EvalStatus, FinalStatus, PickResult, ReviewVerdict, RunStatus, StoredWord, Verdict, Word,
};
