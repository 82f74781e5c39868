//! How the command ends (an error to print, a closed pipe, a failed lint) and what it draws on
//! stderr while it works.

use std::io::{self, IsTerminal};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Why the command stopped.
pub(crate) enum Failure {
    /// An error to print.
    Message(String),
    /// Standard output was closed (`| head`): end quietly.
    Closed,
    /// The lint found errors (already printed).
    Lint,
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Failure::Message(message)
    }
}

impl From<&str> for Failure {
    fn from(message: &str) -> Self {
        Failure::Message(message.to_owned())
    }
}

/// A failed write to standard output: a closed pipe ends the command quietly.
pub(crate) fn written(e: io::Error) -> Failure {
    if e.kind() == io::ErrorKind::BrokenPipe {
        Failure::Closed
    } else {
        Failure::Message(format!("cannot write to standard output: {e}"))
    }
}

/// A progress bar on stderr when it is a terminal, hidden otherwise.
pub(crate) fn progress(len: u64, template: &str) -> ProgressBar {
    let target = if io::stderr().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    };
    let bar = ProgressBar::with_draw_target(Some(len), target)
        .with_finish(indicatif::ProgressFinish::AndClear);
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    bar
}
