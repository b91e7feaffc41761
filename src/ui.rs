//! All progress output goes through one handle: one indicatif line per researcher on a TTY,
//! plain lines on stderr otherwise. Results go to stdout from the commands themselves, through
//! `outln!` (and messages through `errln!`).
//!
//! A closed pipe is not an error (as in ripgrep and git): `start 2>&1 | head` must not stop a
//! running conference, so no write here panics or fails. The read-only commands (`status`, `log`,
//! `list`) instead end quietly on a closed stdout, as git does: see [`exit_on_closed_stdout`].

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

/// How the user runs this program, for the commands that hints print: `git conference`, or, in
/// a demo, `cd <the demo's repository> && <program>` (this executable's path before
/// git-conference is on PATH: `cargo run --release -- demo`), so that every hint works as
/// printed.
static INVOCATION: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// The command that runs git-conference in hints (`git conference` unless set otherwise).
pub fn invocation() -> &'static str {
    INVOCATION.get().map_or("git conference", String::as_str)
}

/// Hints name `program` instead of `git conference` (once per process).
pub fn set_invocation(program: String) {
    let _ = INVOCATION.set(program);
}

#[derive(Clone)]
pub struct Ui {
    inner: Arc<Mutex<Inner>>,
}

struct Inner {
    multi: Option<MultiProgress>,
    bars: BTreeMap<String, ProgressBar>,
    quiet: bool,
}

impl Ui {
    /// Bars when stderr is a terminal, plain lines otherwise.
    pub fn new(quiet: bool) -> Ui {
        let multi = (!quiet && std::io::stderr().is_terminal()).then(MultiProgress::new);
        Ui {
            inner: Arc::new(Mutex::new(Inner {
                multi,
                bars: BTreeMap::new(),
                quiet,
            })),
        }
    }

    /// A line of progress.
    pub fn info(&self, line: &str) {
        let inner = self.inner.lock().unwrap();
        if inner.quiet {
            return;
        }
        match &inner.multi {
            Some(m) => {
                let _ = m.println(line);
            }
            None => write_err(format_args!("{line}\n")),
        }
    }

    /// A warning: shown even with `--quiet` (it is not progress), above the bars on a terminal.
    pub fn warn(&self, line: &str) {
        let inner = self.inner.lock().unwrap();
        match &inner.multi {
            Some(m) => {
                let _ = m.println(line);
            }
            None => write_err(format_args!("{line}\n")),
        }
    }

    /// Updates a researcher's status line (a bar on a TTY; on a pipe, `info` prints events).
    pub fn researcher(&self, id: &str, text: &str) {
        let mut inner = self.inner.lock().unwrap();
        let Some(multi) = inner.multi.clone() else {
            return;
        };
        let bar = inner.bars.entry(id.to_string()).or_insert_with(|| {
            let bar = multi.add(ProgressBar::new_spinner());
            bar.set_style(ProgressStyle::with_template("{spinner} {prefix:.bold} {msg}").unwrap());
            bar.set_prefix(format!("researcher {id}"));
            bar.enable_steady_tick(std::time::Duration::from_millis(200));
            bar
        });
        bar.set_message(text.to_string());
    }

    /// Removes the researcher lines (end of a phase).
    pub fn clear_researchers(&self) {
        let mut inner = self.inner.lock().unwrap();
        for (_, bar) in std::mem::take(&mut inner.bars) {
            bar.finish_and_clear();
        }
    }
}

/// Writes to stdout, ignoring a closed pipe (and any other write error): results of a command
/// that has done its work.
pub fn write_out(args: std::fmt::Arguments) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_fmt(args).and_then(|()| out.flush());
}

/// Writes to stderr, ignoring a closed pipe.
pub fn write_err(args: std::fmt::Arguments) {
    let _ = std::io::stderr().lock().write_fmt(args);
}

/// `println!` that never panics on a closed stdout.
#[macro_export]
macro_rules! outln {
    () => { $crate::ui::write_out(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::ui::write_out(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `eprintln!` that never panics on a closed stderr.
#[macro_export]
macro_rules! errln {
    () => { $crate::ui::write_err(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::ui::write_err(format_args!("{}\n", format_args!($($arg)*))) };
}

/// For commands that only read and print: a closed stdout (`git conference log | head`) ends the
/// process quietly, as it ends git (SIGPIPE; git reports no error for it). Rust ignores SIGPIPE,
/// which turns the closed pipe into a panic in `println!`.
pub fn exit_on_closed_stdout() {
    crate::os::default_sigpipe();
}
