//! The target side against an in-memory source (reuse, corruption, cancellation, clean-up,
//! resume, pacing), and the peer source against [`peer::serve_file`] over a real transport.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::{self, StreamExt};
use parking_lot::Mutex;
use shoal_types::ErrorKind;

use super::peer::{self, PeerSource, ServedFiles};
use super::target::{Differing, FileTransfer, Progress, TransferControl, TransferStats};
use super::{ByteStream, FileMeta, FileSource};
use crate::error::{ApiError, ApiResult};
use crate::pressure::{PoolConfig, PoolKind, ThreadPool};
use crate::recovery::throttle::RateLimiter;

/// A segment-like file: `body` followed by tantivy's footer (`{"crc": crc32}`, its length,
/// the magic), so the store's checksum check accepts a local copy of it.
fn segment_file(body: &[u8]) -> Bytes {
    let footer = format!("{{\"crc\":{}}}", crc32fast::hash(body));
    let mut bytes = body.to_vec();
    bytes.extend_from_slice(footer.as_bytes());
    bytes.extend_from_slice(&(footer.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&1337u32.to_le_bytes());
    Bytes::from(bytes)
}

fn meta(name: &str, bytes: &[u8]) -> FileMeta {
    FileMeta {
        name: name.to_string(),
        length: bytes.len() as u64,
        crc32c: crc32c::crc32c(bytes),
    }
}

/// Serves files from memory in `chunk`-byte pieces; can break a stream once.
struct MemorySource {
    files: HashMap<String, Bytes>,
    chunk: usize,
    opens: Mutex<Vec<(String, u64)>>,
    /// (file, chunks served before the stream breaks with a transient error), once.
    break_once: Mutex<Option<(String, usize)>>,
}

impl MemorySource {
    fn new(files: &[(&str, &Bytes)], chunk: usize) -> MemorySource {
        MemorySource {
            files: files
                .iter()
                .map(|(n, b)| (n.to_string(), (*b).clone()))
                .collect(),
            chunk,
            opens: Mutex::new(Vec::new()),
            break_once: Mutex::new(None),
        }
    }

    fn opened(&self) -> Vec<(String, u64)> {
        let mut opens = self.opens.lock().clone();
        opens.sort();
        opens
    }
}

impl FileSource for MemorySource {
    fn open(&self, file: &FileMeta, offset: u64) -> BoxFuture<'static, ApiResult<ByteStream>> {
        self.opens.lock().push((file.name.clone(), offset));
        let bytes = self.files[&file.name].slice(offset as usize..);
        let mut chunks: Vec<ApiResult<Bytes>> = (0..bytes.len())
            .step_by(self.chunk)
            .map(|at| Ok(bytes.slice(at..(at + self.chunk).min(bytes.len()))))
            .collect();
        let mut broken = self.break_once.lock();
        if let Some((_, after)) = broken.as_ref().filter(|(n, _)| *n == file.name) {
            chunks.truncate(*after);
            let error = ApiError::new(503, "node_not_connected_exception", "connection reset")
                .with_kind(ErrorKind::Unavailable);
            chunks.push(Err(error));
            *broken = None;
        }
        Box::pin(async move { Ok(stream::iter(chunks).boxed()) })
    }

    fn describe(&self) -> String {
        "memory".to_string()
    }
}

/// Records progress; cancels after a number of chunks; optionally paced.
#[derive(Default)]
struct TestControl {
    chunks: AtomicUsize,
    cancel_after: Option<usize>,
    rate: Option<u64>,
    received: AtomicUsize,
    events: Mutex<Vec<String>>,
}

impl TransferControl for TestControl {
    fn check(&self) -> ApiResult<()> {
        match self.cancel_after {
            Some(n) if self.chunks.load(Ordering::SeqCst) >= n => {
                Err(
                    ApiError::new(409, "recovery_cancelled_exception", "cancelled")
                        .with_kind(ErrorKind::Moved),
                )
            }
            _ => Ok(()),
        }
    }

    fn max_bytes_per_sec(&self) -> Option<u64> {
        self.rate
    }

    fn progress(&self, event: Progress<'_>) {
        let text = match event {
            Progress::Reused(f) => format!("reused {}", f.name),
            Progress::Copied(f) => format!("copied {}", f.name),
            Progress::Received { bytes, .. } => {
                self.received.fetch_add(bytes as usize, Ordering::SeqCst);
                return;
            }
        };
        self.events.lock().push(text);
    }

    fn after_chunk(&self) {
        self.chunks.fetch_add(1, Ordering::SeqCst);
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn transfer(
    dir: &Path,
    source: &dyn FileSource,
    control: &TestControl,
    differing: Differing,
    files: &[FileMeta],
) -> ApiResult<TransferStats> {
    let runtime = runtime();
    let limiter = RateLimiter::default();
    FileTransfer {
        dir,
        source,
        runtime: runtime.handle(),
        limiter: &limiter,
        control,
        differing,
        files_in_flight: 2,
    }
    .run(files)
}

/// Every file name in `dir`, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn copies_what_is_missing_or_different_and_reuses_what_matches() {
    let dir = tempfile::tempdir().unwrap();
    let (same, missing, changed) = (
        segment_file(&[1u8; 3000]),
        segment_file(&[2u8; 5000]),
        segment_file(&[3u8; 4000]),
    );
    std::fs::write(dir.path().join("a.idx"), &same).unwrap();
    std::fs::write(dir.path().join("c.del"), segment_file(&[9u8; 4000])).unwrap();
    let source = MemorySource::new(
        &[("a.idx", &same), ("b.idx", &missing), ("c.del", &changed)],
        1024,
    );
    let files = [
        meta("a.idx", &same),
        meta("b.idx", &missing),
        meta("c.del", &changed),
    ];
    let control = TestControl::default();

    let stats = transfer(dir.path(), &source, &control, Differing::Replace, &files).unwrap();

    assert_eq!(
        stats,
        TransferStats {
            files_copied: 2,
            bytes_copied: (missing.len() + changed.len()) as u64,
            files_reused: 1,
            bytes_reused: same.len() as u64,
            diff: stats.diff,
        }
    );
    assert_eq!(
        source.opened(),
        vec![("b.idx".into(), 0), ("c.del".into(), 0)]
    );
    assert_eq!(std::fs::read(dir.path().join("b.idx")).unwrap(), missing);
    assert_eq!(std::fs::read(dir.path().join("c.del")).unwrap(), changed);
    assert_eq!(
        names_in(dir.path()),
        vec!["a.idx", "b.idx", "c.del"],
        "no partial file left"
    );
    assert_eq!(
        *control.events.lock(),
        vec!["reused a.idx", "copied b.idx", "copied c.del"]
    );
    assert_eq!(
        control.received.load(Ordering::SeqCst),
        missing.len() + changed.len()
    );
}

#[test]
fn bytes_that_do_not_match_the_listed_checksum_fail_and_leave_nothing_under_the_name() {
    let dir = tempfile::tempdir().unwrap();
    let good = segment_file(&[4u8; 6000]);
    let mut damaged = good.to_vec();
    damaged[100] ^= 0x20;
    let source = MemorySource::new(&[("d.term", &Bytes::from(damaged))], 1000);
    let control = TestControl::default();

    let error = transfer(
        dir.path(),
        &source,
        &control,
        Differing::Replace,
        &[meta("d.term", &good)],
    )
    .unwrap_err();

    assert_eq!(error.error_type, "corrupt_index_exception");
    assert!(
        error.reason.contains("[d.term]") && error.reason.contains("corrupted"),
        "{}",
        error.reason
    );
    assert!(
        names_in(dir.path()).is_empty(),
        "{:?}",
        names_in(dir.path())
    );
}

#[test]
fn a_local_file_of_a_listed_name_with_other_bytes_fails_a_transfer_that_must_not_replace() {
    let dir = tempfile::tempdir().unwrap();
    let (listed, local) = (segment_file(&[5u8; 2000]), segment_file(&[6u8; 2000]));
    std::fs::write(dir.path().join("e.pos"), &local).unwrap();
    let source = MemorySource::new(&[("e.pos", &listed)], 512);
    let control = TestControl::default();

    let error = transfer(
        dir.path(),
        &source,
        &control,
        Differing::Fail,
        &[meta("e.pos", &listed)],
    )
    .unwrap_err();

    assert_eq!(error.error_type, "corrupt_index_exception");
    assert!(
        error.reason.contains("local file [e.pos] differs"),
        "{}",
        error.reason
    );
    assert!(source.opened().is_empty(), "nothing was fetched");
    assert_eq!(
        std::fs::read(dir.path().join("e.pos")).unwrap(),
        local,
        "left as it was"
    );
}

#[test]
fn a_local_file_with_the_listed_bytes_is_reused_even_when_differing_means_damage() {
    let dir = tempfile::tempdir().unwrap();
    let listed = segment_file(&[7u8; 2000]);
    std::fs::write(dir.path().join("f.fast"), &listed).unwrap();
    let source = MemorySource::new(&[("f.fast", &listed)], 512);
    let control = TestControl::default();

    let stats = transfer(
        dir.path(),
        &source,
        &control,
        Differing::Fail,
        &[meta("f.fast", &listed)],
    )
    .unwrap();

    assert_eq!((stats.files_reused, stats.files_copied), (1, 0));
    assert!(source.opened().is_empty());
}

#[test]
fn a_cancelled_transfer_stops_between_chunks_and_removes_its_partial_file() {
    let dir = tempfile::tempdir().unwrap();
    let big = segment_file(&[8u8; 64 * 1024]);
    let source = MemorySource::new(&[("g.store", &big)], 4096);
    let control = TestControl {
        cancel_after: Some(3),
        ..TestControl::default()
    };

    let error = transfer(
        dir.path(),
        &source,
        &control,
        Differing::Replace,
        &[meta("g.store", &big)],
    )
    .unwrap_err();

    assert_eq!((error.status, error.kind), (409, ErrorKind::Moved));
    assert_eq!(
        control.chunks.load(Ordering::SeqCst),
        3,
        "no chunk after the cancellation"
    );
    assert!(
        names_in(dir.path()).is_empty(),
        "{:?}",
        names_in(dir.path())
    );
}

#[test]
fn a_stream_that_ends_early_or_runs_long_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = segment_file(&[1u8; 1000]);
    let source = MemorySource::new(&[("h.idx", &bytes.slice(..900))], 256);
    let control = TestControl::default();
    let short = transfer(
        dir.path(),
        &source,
        &control,
        Differing::Replace,
        &[meta("h.idx", &bytes)],
    );
    assert!(short.unwrap_err().reason.contains("received 900"));

    let mut longer = bytes.to_vec();
    longer.extend_from_slice(b"tail");
    let source = MemorySource::new(&[("h.idx", &Bytes::from(longer))], 256);
    let long = transfer(
        dir.path(),
        &source,
        &control,
        Differing::Replace,
        &[meta("h.idx", &bytes)],
    );
    assert!(long
        .unwrap_err()
        .reason
        .contains(&format!("has {} bytes", bytes.len())));
    assert!(
        names_in(dir.path()).is_empty(),
        "{:?}",
        names_in(dir.path())
    );
}

#[test]
fn a_stream_broken_by_a_transient_failure_resumes_at_the_offset_reached() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = segment_file(&[2u8; 10_000]);
    let source = MemorySource::new(&[("i.src", &bytes)], 1000);
    *source.break_once.lock() = Some(("i.src".to_string(), 4));
    let control = TestControl::default();

    transfer(
        dir.path(),
        &source,
        &control,
        Differing::Replace,
        &[meta("i.src", &bytes)],
    )
    .unwrap();

    assert_eq!(
        source.opened(),
        vec![("i.src".into(), 0), ("i.src".into(), 4000)]
    );
    assert_eq!(std::fs::read(dir.path().join("i.src")).unwrap(), bytes);
    assert_eq!(
        control.received.load(Ordering::SeqCst),
        bytes.len(),
        "no byte counted twice"
    );
}

#[test]
fn chunks_are_paced_at_the_configured_rate() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = segment_file(&[3u8; 4 * 65_536 - 20]);
    let source = MemorySource::new(&[("j.idx", &bytes)], 65_536);
    let control = TestControl {
        rate: Some(1 << 20),
        ..TestControl::default()
    };
    let started = Instant::now();
    transfer(
        dir.path(),
        &source,
        &control,
        Differing::Replace,
        &[meta("j.idx", &bytes)],
    )
    .unwrap();
    // The first chunk passes at once, the three others wait 1/16 s each at 1 MiB/s.
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(170), "{took:?}");
}

peer::file_stream_action!(
    /// The file stream of these tests.
    TestFileStream,
    "internal:test/transfer/file_stream",
    min_version = 1
);

/// Files of a directory, all of them served.
struct DirFiles(std::path::PathBuf);

impl ServedFiles for DirFiles {
    fn path(&self, name: &str) -> Option<std::path::PathBuf> {
        let path = self.0.join(name);
        path.is_file().then_some(path)
    }
}

fn test_pool() -> ThreadPool {
    ThreadPool::new(
        "test",
        PoolConfig {
            name: "replication".into(),
            kind: PoolKind::Scaling,
            core: 1,
            max: 2,
            queue_size: None,
            keep_alive: Some(Duration::from_secs(1)),
        },
    )
}

#[test]
fn a_peer_source_streams_files_served_from_another_node() {
    let (served, local) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (one, two, empty) = (
        segment_file(&[1u8; 300_000]),
        segment_file(&[2u8; 10]),
        Bytes::new(),
    );
    std::fs::write(served.path().join("one.idx"), &one).unwrap();
    std::fs::write(served.path().join("two.idx"), &two).unwrap();
    std::fs::write(served.path().join("empty"), &empty).unwrap();
    let runtime = runtime();
    let files: Arc<dyn ServedFiles> = Arc::new(DirFiles(served.path().to_path_buf()));
    let pool = test_pool();
    let mut registry = shoal_transport::ActionRegistry::new();
    registry.register_stream::<TestFileStream, _, _, _>(move |_, request| {
        let served = peer::serve_file(files.clone(), request, pool.clone());
        async move {
            let chunks = served.map_err(ApiError::into_remote)?;
            Ok(chunks.map(|chunk| chunk.map_err(ApiError::into_remote)))
        }
    });
    let server = shoal_transport::Transport::new("source".to_string());
    let handle = runtime
        .block_on(server.serve("127.0.0.1:0".parse().unwrap(), Arc::new(registry)))
        .unwrap();
    let source = PeerSource::<TestFileStream> {
        transport: shoal_transport::Transport::new("target".to_string()),
        node: "source".into(),
        address: handle.local_addr().to_string(),
        session: "s1".into(),
        chunk_bytes: 64 * 1024,
        idle_timeout: Duration::from_secs(10),
        action: PhantomData,
    };
    let listed = [
        meta("one.idx", &one),
        meta("two.idx", &two),
        meta("empty", &empty),
    ];
    let limiter = RateLimiter::default();
    let control = TestControl::default();
    let stats = FileTransfer {
        dir: local.path(),
        source: &source,
        runtime: runtime.handle(),
        limiter: &limiter,
        control: &control,
        differing: Differing::Replace,
        files_in_flight: 2,
    }
    .run(&listed)
    .unwrap();

    assert_eq!(stats.files_copied, 3);
    assert_eq!(std::fs::read(local.path().join("one.idx")).unwrap(), one);
    assert_eq!(std::fs::read(local.path().join("two.idx")).unwrap(), two);
    assert_eq!(
        control.chunks.load(Ordering::SeqCst),
        5 + 1,
        "300 kB in 64 kB chunks, then 1"
    );
    let missing = runtime
        .block_on(source.open(&meta("nope", b""), 0))
        .err()
        .expect("an unknown file is refused");
    assert_eq!(
        (missing.status, missing.reason.as_str()),
        (400, "no file [nope] in recovery")
    );
    let resumed: Vec<Bytes> = runtime.block_on(async {
        let chunks = source.open(&listed[0], 290_000).await.unwrap();
        chunks.map(Result::unwrap).collect().await
    });
    assert_eq!(
        resumed.concat(),
        one[290_000..].to_vec(),
        "opened at an offset"
    );
}

/// Notes which files are under their names when the first bytes of `last` arrive.
struct LastFileWatch {
    dir: std::path::PathBuf,
    last: &'static str,
    named_then: Mutex<Option<Vec<String>>>,
}

impl TransferControl for LastFileWatch {
    fn check(&self) -> ApiResult<()> {
        Ok(())
    }

    fn max_bytes_per_sec(&self) -> Option<u64> {
        None
    }

    fn progress(&self, event: Progress<'_>) {
        if let Progress::Received { file, .. } = event {
            let mut named = self.named_then.lock();
            if file.name == self.last && named.is_none() {
                *named = Some(names_in(&self.dir));
            }
        }
    }
}

#[test]
fn the_last_listed_file_is_written_once_every_other_is_complete_under_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let bodies: Vec<Bytes> = (0..5u8).map(|n| segment_file(&[n; 6000])).collect();
    let names = ["a.idx", "b.pos", "c.store", "d.term", "meta.json"];
    let served: Vec<(&str, &Bytes)> = names.iter().copied().zip(bodies.iter()).collect();
    let source = MemorySource::new(&served, 1024);
    let files: Vec<FileMeta> = served.iter().map(|(n, b)| meta(n, b)).collect();
    let control = LastFileWatch {
        dir: dir.path().to_path_buf(),
        last: "meta.json",
        named_then: Mutex::new(None),
    };
    let (runtime, limiter) = (runtime(), RateLimiter::default());

    let stats = FileTransfer {
        dir: dir.path(),
        source: &source,
        runtime: runtime.handle(),
        limiter: &limiter,
        control: &control,
        differing: Differing::Replace,
        files_in_flight: 3,
    }
    .run(&files)
    .unwrap();

    assert_eq!(stats.files_copied, 5);
    let named_then = control.named_then.lock().clone().unwrap();
    assert_eq!(
        named_then,
        vec![
            "a.idx",
            "b.pos",
            "c.store",
            "d.term",
            "meta.json.recovering"
        ],
        "every other file complete (fsynced, renamed) before the commit point's bytes"
    );
    assert_eq!(names_in(dir.path()), names.to_vec());
}
