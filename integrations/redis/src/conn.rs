//! The connection the store's calls go through: one Redis server (a reconnecting
//! [`ConnectionManager`]) or, with the `cluster` feature and a `redis+cluster://` URL, a
//! Redis Cluster (redis-rs's cluster connection: commands routed by their key's slot, `MOVED`
//! and `ASK` followed, the slot map refreshed after a failover). Also the nodes a cached store
//! subscribes to, in turn.

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::{Cmd, Pipeline, RedisFuture, Value};

/// The scheme of a cluster URL: `redis+cluster://[user][:password@]host:port[,host:port...]/`.
pub(super) const CLUSTER_SCHEME: &str = "redis+cluster://";

/// A store's connection.
#[derive(Clone)]
pub(crate) enum Conn {
    /// One server.
    Single(ConnectionManager),
    /// A Redis Cluster.
    #[cfg(feature = "cluster")]
    Cluster(redis::cluster_async::ClusterConnection),
}

impl Conn {
    /// True for a cluster: a pipeline may hold the commands of one slot only.
    pub(super) fn is_cluster(&self) -> bool {
        !matches!(self, Conn::Single(_))
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(conn) => conn.req_packed_command(cmd),
            #[cfg(feature = "cluster")]
            Conn::Cluster(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(conn) => conn.req_packed_commands(cmd, offset, count),
            #[cfg(feature = "cluster")]
            Conn::Cluster(conn) => conn.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(conn) => conn.get_db(),
            #[cfg(feature = "cluster")]
            Conn::Cluster(conn) => conn.get_db(),
        }
    }
}

/// The node URLs of a `redis+cluster://` URL (each `redis://` with the URL's credentials), or
/// `None` for another URL.
pub(super) fn cluster_nodes(url: &str) -> Option<Vec<String>> {
    let rest = url.strip_prefix(CLUSTER_SCHEME)?;
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let (credentials, hosts) = match authority.rsplit_once('@') {
        Some((credentials, hosts)) => (format!("{credentials}@"), hosts),
        None => (String::new(), authority),
    };
    let nodes: Vec<String> = hosts
        .split(',')
        .filter(|host| !host.is_empty())
        .map(|host| format!("redis://{credentials}{host}/{path}"))
        .collect();
    Some(nodes)
}

#[cfg(test)]
mod tests {
    use super::cluster_nodes;

    #[test]
    fn a_cluster_url_names_every_node_with_its_credentials() {
        assert_eq!(
            cluster_nodes("redis+cluster://:secret@10.0.0.1:7000,10.0.0.2:7001/"),
            Some(vec![
                "redis://:secret@10.0.0.1:7000/".to_owned(),
                "redis://:secret@10.0.0.2:7001/".to_owned()
            ])
        );
        assert_eq!(
            cluster_nodes("redis+cluster://127.0.0.1:7000"),
            Some(vec!["redis://127.0.0.1:7000/".to_owned()])
        );
        assert_eq!(cluster_nodes("redis://127.0.0.1:6379/"), None);
    }
}
