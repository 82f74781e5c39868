//! A `Write` into shared memory, so a test reads back what the recording layer wrote.

use std::io::Write;
use std::sync::{Arc, Mutex};

/// A `Write` into shared memory; clones share it.
#[derive(Clone, Default)]
pub(crate) struct Memory(pub(crate) Arc<Mutex<Vec<u8>>>);

impl Write for Memory {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
