//! Parameter sweeps as agents read them: the prompt's section that says how to ask for one
//! (`SWEEP: <path>:<name> = v1, v2, …`, read by `model::sweep`) when `Parameter sweep: on`.

/// The prompt's section on sweeps.
pub fn prompt_section() -> String {
    format!(
        "## Parameter sweeps\nWhen your change tunes a number that is the whole value of an \
         assignment (`LEARNING_RATE = 3e-4` in train.py), you may have several values of it \
         measured in this one attempt: end your note with a line\n\
         `SWEEP: <path>:<name> = v1, v2, v3` (such as \
         `SWEEP: train.py:LEARNING_RATE = 1e-4, 3e-4, 1e-3`), {} to {} values. The conference \
         measures your change once per value, in parallel where it can, and the best value is \
         your attempt (the others are recorded with their metrics). A line it cannot follow is \
         a warning, and your change is then measured as you left it.\n\n",
        crate::model::sweep::MIN_VALUES,
        crate::model::sweep::MAX_VALUES
    )
}
