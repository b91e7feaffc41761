//! The built-in researchers, which need no agent command: `builtin:tune` (`tune/`, the search over
//! numeric literals, no I/O: the engine hands it the history) and `builtin:openai` (`openai/`, any
//! OpenAI-compatible chat endpoint asked for edits, in-process). They import the layers below the
//! engine (the agent call's types in `agents::call`, config, exec, git), never the engine.

pub mod openai;
pub mod tune;
