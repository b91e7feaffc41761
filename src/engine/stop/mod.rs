//! When a conference stops: the stop rules in the original's order (`rules`) and the ledger of
//! what the agents used, with the token and cost budgets it enforces (`budget`). May import the
//! engine's other rooms and the layers below it.

pub mod budget;
pub mod rules;
