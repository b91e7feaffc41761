//! The end-to-end tests: one test binary, one module per feature. Each drives the real binary
//! as `git conference …` through the real `git` in temporary repositories (`common`), and checks
//! the results with plain git. Run one feature with `cargo test --test e2e <module>::`.

mod agents;
mod cli_docs;
mod code_layout;
mod common;
mod completion;
mod conference;
mod demo;
mod docs_links;
mod format;
mod harden;
mod hostile;
mod import;
mod knowledge;
mod launchers;
mod machines;
mod misbehaving_agents;
mod ml;
mod mlflow;
mod never_stop;
mod newcomer;
mod noise;
mod openai;
mod orphans;
mod others_things;
mod progress;
mod prompt;
mod protocol;
mod prune;
mod research_loop;
mod resume;
mod rules;
mod running_time;
mod serve;
mod snapshots_of_texts;
mod sweep;
mod talk;
mod tree;
mod trust;
mod truth;
mod tune;
mod tune_batch;
