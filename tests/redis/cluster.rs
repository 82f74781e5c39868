//! One circuit across replicas on a Redis Cluster: six `redis-server`s with `--cluster-enabled`
//! on loopback ports (three masters, each with a replica, made by `redis-cli --cluster create`),
//! two replicas whose stores connect with a `redis+cluster://` URL, keys in different slots.
//! Replica A trips each key, replica B is rejected without reaching the backend; then the master
//! holding one key is killed (`kill -9`): while its replica is promoted every call answers within
//! the store's timeout, and afterwards a circuit tripped on A is still rejected on B.

use std::sync::LazyLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::harness::{BackendError, RedisServer, command_on, reply_on};
use fusebox::{Reason, Registry, circuit_breaker};
use fusebox_redis::RedisStore;

static A: LazyLock<Registry> = LazyLock::new(Registry::new);
static B: LazyLock<Registry> = LazyLock::new(Registry::new);
static CALLS: AtomicU32 = AtomicU32::new(0);

/// Five failures open it, for a minute.
#[circuit_breaker(key = key, registry = A, window = 5, min_calls = 5, open_for = "60s")]
async fn on_a(key: &str) -> Result<(), BackendError> {
    CALLS.fetch_add(1, Ordering::SeqCst);
    Err(BackendError::Down)
}

#[circuit_breaker(key = key, registry = B, window = 5, min_calls = 5, open_for = "60s")]
async fn on_b(key: &str) -> Result<(), BackendError> {
    CALLS.fetch_add(1, Ordering::SeqCst);
    Err(BackendError::Down)
}

fn rejected<T>(result: &Result<T, BackendError>) -> Option<Reason> {
    match result {
        Err(BackendError::Rejected(e)) => Some(e.reason()),
        _ => None,
    }
}

/// A cluster of `masters` masters with one replica each, every node a `redis-server` of its own.
struct Cluster {
    nodes: Vec<RedisServer>,
    dirs: Vec<std::path::PathBuf>,
}

impl Cluster {
    fn start(masters: usize) -> Cluster {
        let mut nodes = Vec::new();
        let mut dirs = Vec::new();
        for i in 0..masters * 2 {
            let dir = std::env::temp_dir().join(format!(
                "fusebox-cluster-{}-{i}-{}",
                std::process::id(),
                fastrand::u32(..)
            ));
            std::fs::create_dir_all(&dir).unwrap();
            let dir_arg = dir.to_string_lossy().into_owned();
            nodes.push(RedisServer::start_with(&[
                "--cluster-enabled",
                "yes",
                "--cluster-node-timeout",
                "1000",
                // A replica syncs at once, and may be promoted however old its copy is.
                "--repl-diskless-sync-delay",
                "0",
                "--cluster-replica-validity-factor",
                "0",
                "--dir",
                &dir_arg,
            ]));
            dirs.push(dir);
        }
        let addresses: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let output = std::process::Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addresses)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .output()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run `redis-cli`: {e}; install it with `{}`",
                    crate::harness::INSTALL
                )
            });
        assert!(
            output.status.success(),
            "`redis-cli --cluster create` failed: {}",
            String::from_utf8_lossy(&output.stdout)
        );
        let cluster = Cluster { nodes, dirs };
        cluster.wait_ok(&[]);
        cluster.wait_replicas();
        cluster
    }

    /// The URL every store connects with.
    fn url(&self) -> String {
        let hosts: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        format!("redis+cluster://{}/", hosts.join(","))
    }

    /// Waits (at most 30 s) until every node but `gone` says `cluster_state:ok` and sees as many
    /// masters serving slots as at the start.
    fn wait_ok(&self, gone: &[u16]) {
        let deadline = Instant::now() + Duration::from_secs(30);
        for node in self.nodes.iter().filter(|n| !gone.contains(&n.port)) {
            loop {
                let info = reply_on(node.port, &["CLUSTER", "INFO"]);
                if info.iter().any(|l| l.trim() == "cluster_state:ok") {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "node {} never reached cluster_state:ok: {info:?}",
                    node.port
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// Waits (at most 30 s) until every replica's link to its master is up.
    fn wait_replicas(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        for node in &self.nodes {
            loop {
                let info = reply_on(node.port, &["INFO", "replication"]);
                let replica = info.iter().any(|l| l.trim() == "role:slave");
                if !replica || info.iter().any(|l| l.trim() == "master_link_status:up") {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "replica {} never synced: {info:?}",
                    node.port
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// The port of the master serving `hash` (a Redis key).
    fn master_of(&self, hash: &str) -> u16 {
        let slot: u16 = command_on(self.nodes[0].port, &["CLUSTER", "KEYSLOT", hash])
            .trim_start_matches(':')
            .parse()
            .unwrap();
        for line in reply_on(self.nodes[0].port, &["CLUSTER", "NODES"]) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() < 9 || !fields[2].contains("master") {
                continue;
            }
            let serves = fields[8..].iter().any(|range| {
                let (lo, hi) = range.split_once('-').unwrap_or((range, range));
                matches!((lo.parse::<u16>(), hi.parse::<u16>()), (Ok(lo), Ok(hi)) if lo <= slot && slot <= hi)
            });
            if serves {
                let address = fields[1].split('@').next().unwrap();
                return address.rsplit(':').next().unwrap().parse().unwrap();
            }
        }
        panic!("no master serves slot {slot}");
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.nodes.clear();
        for dir in &self.dirs {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// A trips `key` (five failures); B is then rejected without reaching the backend.
async fn shared(key: &str) {
    for _ in 0..5 {
        assert!(matches!(on_a(key).await, Err(BackendError::Down)), "{key}");
    }
    let before = CALLS.load(Ordering::SeqCst);
    assert_eq!(rejected(&on_a(key).await), Some(Reason::Open), "{key} on A");
    assert_eq!(rejected(&on_b(key).await), Some(Reason::Open), "{key} on B");
    assert_eq!(
        CALLS.load(Ordering::SeqCst),
        before,
        "{key}: B reached the backend"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_circuit_is_shared_across_slots_and_survives_a_master_failover() {
    let mut cluster = Cluster::start(3);
    let url = cluster.url();
    let store_a = RedisStore::connect(&url)
        .await
        .expect("connect A to the cluster");
    let store_b = RedisStore::connect(&url)
        .await
        .expect("connect B to the cluster");
    A.share(store_a.clone());
    B.share(store_b);
    // Keys whose hashes fall on different masters.
    let keys = [
        "cluster-payment",
        "cluster-shipping",
        "cluster-search",
        "cluster-refund",
    ];
    let masters: Vec<u16> = keys
        .iter()
        .map(|k| cluster.master_of(&store_a.redis_key(k)))
        .collect();
    assert!(
        masters.iter().any(|m| *m != masters[0]),
        "every key on one master: {masters:?}"
    );
    for key in &keys[..2] {
        shared(key).await;
    }

    // The master of the first key dies; its replica is promoted.
    let victim = masters[0];
    let at = cluster.nodes.iter().position(|n| n.port == victim).unwrap();
    cluster.nodes.remove(at).kill();
    let bound = store_a.timeout() + Duration::from_millis(500);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut answered = 0;
    while Instant::now() < deadline {
        for key in &keys[..2] {
            for result in [on_a(key).await, on_b(key).await] {
                assert!(
                    matches!(
                        result,
                        Err(BackendError::Rejected(_)) | Err(BackendError::Down)
                    ),
                    "{key}: {result:?}"
                );
            }
        }
        let started = Instant::now();
        let _ = on_b(keys[0]).await;
        assert!(
            started.elapsed() <= bound,
            "a call took {:?} during the failover (store timeout {:?})",
            started.elapsed(),
            store_a.timeout()
        );
        answered += 1;
        let promoted = cluster.master_of(&store_a.redis_key(keys[0])) != victim;
        if promoted && answered > 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    cluster.wait_ok(&[victim]);
    assert_ne!(
        cluster.master_of(&store_a.redis_key(keys[0])),
        victim,
        "no replica was promoted"
    );

    // After the failover: both keys still reject on both replicas, and a key not tripped before,
    // on the promoted master's slot or another, is one circuit across A and B.
    for key in &keys[..2] {
        assert!(
            rejected(&on_a(key).await).is_some(),
            "{key} on A after the failover"
        );
        assert!(
            rejected(&on_b(key).await).is_some(),
            "{key} on B after the failover"
        );
    }
    for key in &keys[2..] {
        shared(key).await;
    }
}
