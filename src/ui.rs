//! All progress output goes through one handle: one indicatif line per researcher on a TTY,
//! plain lines on stderr otherwise. Results go to stdout from the commands themselves.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::{Arc, Mutex};

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

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
            None => eprintln!("{line}"),
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
