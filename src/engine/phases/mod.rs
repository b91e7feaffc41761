//! The protocol's phases, one file (or folder) each: research (phase 1), the poster session and
//! peer review, knowledge transfer, synthesis, the retrospective and brief of knowledge across
//! conferences, and talk (people's requests). A phase imports none of the others; what they share
//! is in the rooms beside this folder (`agent`, `measure`, `record`, `stop`, `machines`).

pub mod knowledge;
pub mod research;
pub mod review;
pub mod synthesis;
pub mod talk;
pub mod transfer;
