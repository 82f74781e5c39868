//! The body of `GET /events`: server-sent events written by hand so that a connection holds at
//! most one board. The next event is not taken while the previous one is unwritten (still in the
//! server's write buffer), and an event is the board every connection shares, not a copy.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use tokio::sync::{Notify, watch};

use crate::hub::{Board, Connection};

/// A comment line sent after this long without a board, so proxies keep the connection open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Whether a connection's last event is still unwritten, and who waits for it.
#[derive(Default)]
struct Unwritten {
    pending: AtomicBool,
    written: Notify,
}

impl Unwritten {
    /// Waits until the last event left the server's buffer.
    async fn wait(&self) {
        while self.pending.load(Ordering::Acquire) {
            self.written.notified().await;
        }
    }
}

/// An event handed to the server: its bytes are the shared board's; dropping it (the server
/// wrote it out, or the connection closed) lets the next event be taken.
struct Sent {
    event: Bytes,
    unwritten: Arc<Unwritten>,
}

impl AsRef<[u8]> for Sent {
    fn as_ref(&self) -> &[u8] {
        &self.event
    }
}

impl Drop for Sent {
    fn drop(&mut self) {
        self.unwritten.pending.store(false, Ordering::Release);
        self.unwritten.written.notify_one();
    }
}

/// What one connection's stream keeps between events.
struct Stream {
    boards: watch::Receiver<Board>,
    unwritten: Arc<Unwritten>,
    first: bool,
    _connection: Connection,
}

impl Stream {
    /// The next event: the current board first, then the latest board after each change (a
    /// connection that falls behind skips to it), or a keep-alive comment.
    async fn next(&mut self) -> Option<Bytes> {
        self.unwritten.wait().await;
        let event = if std::mem::take(&mut self.first) {
            self.boards.borrow_and_update().event.clone()
        } else {
            tokio::select! {
                changed = self.boards.changed() => {
                    changed.ok()?;
                    self.boards.borrow_and_update().event.clone()
                }
                () = tokio::time::sleep(KEEP_ALIVE) => Bytes::from_static(b":\n\n"),
            }
        };
        self.unwritten.pending.store(true, Ordering::Release);
        Some(Bytes::from_owner(Sent {
            event,
            unwritten: self.unwritten.clone(),
        }))
    }
}

/// The `GET /events` answer of `connection`.
pub(super) fn events(connection: Connection) -> Response {
    let stream = Stream {
        boards: connection.boards(),
        unwritten: Arc::default(),
        first: true,
        _connection: connection,
    };
    let body = futures_util::stream::unfold(stream, |mut stream| async move {
        let event = stream.next().await?;
        Some((Ok::<_, Infallible>(event), stream))
    });
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(body),
    )
        .into_response()
}
