//! Reading a trace file again for each pass of a replay, so memory stays flat whatever its
//! length, and the error when the file changed in between.

use std::cell::RefCell;
use std::io::BufReader;
use std::path::Path;

use fusebox_replay::trace::{self, Event};

/// The calls of one key of a trace file, read again: the file was read whole once, so an error now
/// means it changed; the first one is kept in `failed` and ends the pass.
pub(crate) struct Reread<'a> {
    reader: Option<trace::Reader<BufReader<std::fs::File>>>,
    key: &'a str,
    failed: &'a RefCell<Option<String>>,
}

impl<'a> Reread<'a> {
    pub(crate) fn open(path: &Path, key: &'a str, failed: &'a RefCell<Option<String>>) -> Self {
        let reader = match std::fs::File::open(path) {
            Ok(file) => Some(trace::Reader::new(BufReader::with_capacity(1 << 16, file))),
            Err(e) => {
                failed.borrow_mut().get_or_insert(e.to_string());
                None
            }
        };
        Reread {
            reader,
            key,
            failed,
        }
    }
}

impl Iterator for Reread<'_> {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        loop {
            match self.reader.as_mut()?.next_call() {
                Ok(Some(call)) if call.key == self.key => return Some(Event::from(&call)),
                Ok(Some(_)) => {}
                Ok(None) => return None,
                Err(e) => {
                    self.failed.borrow_mut().get_or_insert(e.to_string());
                    self.reader = None;
                    return None;
                }
            }
        }
    }
}

/// An error if reading the trace again failed.
pub(crate) fn reread(failed: &RefCell<Option<String>>, shown: &str) -> Result<(), String> {
    match failed.borrow().as_ref() {
        Some(e) => Err(format!(
            "`{shown}` changed while it was replayed ({e}); replay a copy that is not being written"
        )),
        None => Ok(()),
    }
}
