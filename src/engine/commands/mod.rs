//! What the commands other than the run ask of the engine: `apply`, `clean`, `push`/`fetch`,
//! `import`, `log`, `knowledge` and `export mlflow` (`tracking`, which also hooks the MLflow sink
//! onto a run's recorder). Each file is one command's work; the command line (`cli/`) parses and
//! prints. May import the engine's rooms and the layers below it; never a phase or the run.

pub mod apply;
pub mod clean;
pub mod clean_refs;
pub mod exchange;
pub mod import;
pub mod knowledge_exchange;
pub mod knowledge_store;
pub mod log;
pub mod tracking;
