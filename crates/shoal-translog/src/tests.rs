//! Behavioural tests of the translog as a whole.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use crate::generation::{frame_record, generation_path};
use crate::{
    Location, OpKind, Operation, Translog, TranslogConfig, TranslogError, NO_OPS_PERFORMED,
};

fn config() -> TranslogConfig {
    TranslogConfig {
        primary_term: 1,
        ..TranslogConfig::default()
    }
}

fn index_op(seq_no: i64, primary_term: i64) -> Operation {
    let source = format!(r#"{{"seq":{seq_no},"term":{primary_term}}}"#);
    Operation::index(
        format!("doc-{seq_no}"),
        seq_no,
        primary_term,
        1,
        source.into_bytes(),
    )
}

fn all_kinds() -> Vec<Operation> {
    let mut routed = index_op(0, 1);
    routed.routing = Some("user-7".to_string());
    routed.auto_generated_id_timestamp = 1_700_000_000_123;
    vec![
        routed,
        Operation::delete("doc-0", 1, 1, 2),
        Operation::no_op(2, 1, "gap filled on promotion"),
        index_op(3, 1),
    ]
}

fn replay(translog: &Translog) -> Vec<Operation> {
    translog
        .snapshot(0, i64::MAX)
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap()
}

fn seq_nos_and_terms(ops: &[Operation]) -> Vec<(i64, i64)> {
    ops.iter().map(|op| (op.seq_no, op.primary_term)).collect()
}

fn open(dir: &Path) -> (Translog, crate::RecoveryInfo) {
    Translog::open(dir, config(), None).unwrap()
}

fn append_raw(path: &Path, bytes: &[u8]) {
    let mut file = OpenOptions::new().append(true).open(path).unwrap();
    file.write_all(bytes).unwrap();
}

fn flip_byte(path: &Path, offset: u64) {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, offset).unwrap();
    file.write_all_at(&[byte[0] ^ 0x5a], offset).unwrap();
}

#[test]
fn translog_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Translog>();
}

#[test]
fn every_op_kind_round_trips_through_read_and_snapshot_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let translog = Translog::create(dir.path(), config()).unwrap();
    let ops = all_kinds();
    let locations = translog.add_batch(&ops[..2]).unwrap();
    let more = [
        translog.add(&ops[2]).unwrap(),
        translog.add(&ops[3]).unwrap(),
    ];
    for (op, location) in ops.iter().zip(locations.iter().chain(more.iter())) {
        // Readable before any sync: the data is in the page cache.
        assert_eq!(&translog.read(location).unwrap(), op);
    }
    assert_eq!(replay(&translog), ops);
    let uuid = translog.uuid().to_string();
    translog.close().unwrap();

    let (reopened, info) = Translog::open(dir.path(), config(), Some(&uuid)).unwrap();
    assert_eq!(info.operations, 4);
    assert_eq!(info.truncated_bytes, 0);
    assert_eq!(info.max_seq_no, 3);
    assert_eq!(reopened.max_seq_no(), 3);
    assert_eq!(replay(&reopened), ops);
    assert_eq!(reopened.read(&more[1]).unwrap(), ops[3]);
    let kinds: Vec<OpKind> = replay(&reopened).iter().map(|op| op.kind).collect();
    assert_eq!(
        kinds,
        [OpKind::Index, OpKind::Delete, OpKind::NoOp, OpKind::Index]
    );
}

#[test]
fn torn_tail_is_truncated_at_any_cut_point_and_translog_stays_writable() {
    let mut torn_record = Vec::new();
    frame_record(&index_op(5, 1), &mut torn_record).unwrap();
    // Inside the length prefix, inside the crc, at the payload start,
    // inside the payload, one byte short.
    let cuts = [1, 3, 6, 8, 20, torn_record.len() - 1];
    for cut in cuts {
        let dir = tempfile::tempdir().unwrap();
        // Ops 3 and 4 were written but never synced, yet are intact: they must survive.
        let translog = synced_three_then_two_unsynced(dir.path());
        let generation = translog.current_generation();
        drop(translog); // crash: no close, no sync
        append_raw(
            &generation_path(dir.path(), generation),
            &torn_record[..cut],
        );

        let (reopened, info) = open(dir.path());
        assert_eq!(info.truncated_bytes, cut as u64, "cut at {cut}");
        assert!(info.truncation_reason.is_some());
        assert_eq!(info.unsynced_operations_recovered, 2);
        let seq_nos: Vec<i64> = replay(&reopened).iter().map(|op| op.seq_no).collect();
        assert_eq!(seq_nos, [0, 1, 2, 3, 4], "cut at {cut}");

        let location = reopened.add(&index_op(5, 2)).unwrap();
        assert_eq!(reopened.read(&location).unwrap(), index_op(5, 2));
        reopened.close().unwrap();

        let (again, info) = open(dir.path());
        assert_eq!(info.truncated_bytes, 0);
        assert_eq!(again.read(&location).unwrap(), index_op(5, 2));
        assert_eq!(replay(&again).len(), 6);
    }
}

#[test]
fn corrupt_unsynced_tail_record_is_truncated_and_not_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let translog = Translog::create(dir.path(), config()).unwrap();
    for seq_no in 0..3 {
        translog.add(&index_op(seq_no, 1)).unwrap();
    }
    translog.sync().unwrap();
    let last = translog.add(&index_op(3, 1)).unwrap();
    drop(translog);
    flip_byte(
        &generation_path(dir.path(), last.generation),
        last.offset + 20,
    );

    let (reopened, info) = open(dir.path());
    assert_eq!(info.truncated_bytes, last.size as u64);
    assert!(info.truncation_reason.unwrap().contains("checksum"));
    assert_eq!(replay(&reopened).len(), 3);
    assert!(reopened.read(&last).is_err());
}

#[test]
fn corrupt_synced_record_fails_open_with_corrupted() {
    let dir = tempfile::tempdir().unwrap();
    let translog = Translog::create(dir.path(), config()).unwrap();
    let locations: Vec<Location> = (0..3)
        .map(|seq| translog.add(&index_op(seq, 1)).unwrap())
        .collect();
    translog.sync().unwrap();
    drop(translog);
    let path = generation_path(dir.path(), 1);
    flip_byte(&path, locations[1].offset + 12);

    let err = Translog::open(dir.path(), config(), None).unwrap_err();
    match err {
        TranslogError::Corrupted {
            path: bad, offset, ..
        } => {
            assert_eq!(bad, path);
            assert_eq!(offset, locations[1].offset);
        }
        other => panic!("expected corruption, got {other}"),
    }
}

#[test]
fn corrupt_record_in_rolled_generation_fails_open() {
    let dir = tempfile::tempdir().unwrap();
    let translog = Translog::create(dir.path(), config()).unwrap();
    let location = translog.add(&index_op(0, 1)).unwrap();
    translog.roll_generation().unwrap();
    translog.add(&index_op(1, 1)).unwrap();
    translog.close().unwrap();
    flip_byte(
        &generation_path(dir.path(), 1),
        location.offset + location.size as u64 - 1,
    );
    let err = Translog::open(dir.path(), config(), None).unwrap_err();
    assert!(
        matches!(err, TranslogError::Corrupted { offset, .. } if offset == location.offset),
        "{err}"
    );
}

#[test]
fn concurrent_sync_to_shares_fsyncs() {
    const THREADS: i64 = 16;
    const OPS_PER_THREAD: i64 = 100;
    let dir = tempfile::tempdir().unwrap();
    let translog = Arc::new(Translog::create(dir.path(), config()).unwrap());
    let threads: Vec<_> = (0..THREADS)
        .map(|thread| {
            let translog = translog.clone();
            std::thread::spawn(move || {
                for i in 0..OPS_PER_THREAD {
                    let location = translog
                        .add(&index_op(thread * OPS_PER_THREAD + i, 1))
                        .unwrap();
                    translog.sync_to(&location).unwrap();
                    assert!(translog.last_synced_location().offset >= location.end());
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let syncs = translog.stats().syncs_total;
    let requests = (THREADS * OPS_PER_THREAD) as u64;
    // Typically ~10x fewer fsyncs than requests here; leave headroom for slow CI disks.
    assert!(
        syncs > 0 && syncs < requests / 4,
        "{syncs} fsyncs for {requests} sync_to calls"
    );
    assert!(!translog.sync_needed());
    assert_eq!(translog.stats().operations, requests);
}

#[test]
fn sync_to_returns_false_when_already_durable() {
    let dir = tempfile::tempdir().unwrap();
    let translog = Translog::create(dir.path(), config()).unwrap();
    let first = translog.add(&index_op(0, 1)).unwrap();
    let second = translog.add(&index_op(1, 1)).unwrap();
    assert!(translog.sync_to(&second).unwrap());
    assert!(!translog.sync_to(&first).unwrap());
    assert_eq!(translog.stats().syncs_total, 1);
    let bogus = Location {
        offset: second.end() + 1000,
        ..second
    };
    assert!(matches!(
        translog.sync_to(&bogus),
        Err(TranslogError::InvalidLocation { .. })
    ));
}

#[test]
fn roll_trim_unreferenced_and_min_generation_for_seq_no() {
    let dir = tempfile::tempdir().unwrap();
    let translog = Translog::create(dir.path(), config()).unwrap();
    // Generation 1: 0..10, generation 2: 10..20, generation 3 (current): 20..25.
    for generation_start in [0, 10] {
        for seq_no in generation_start..generation_start + 10 {
            translog.add(&index_op(seq_no, 1)).unwrap();
        }
        translog.roll_generation().unwrap();
    }
    let early = translog.add(&index_op(20, 1)).unwrap();
    for seq_no in 21..25 {
        translog.add(&index_op(seq_no, 1)).unwrap();
    }
    assert_eq!(translog.current_generation(), 3);
    assert!(dir.path().join("translog-1.ckp").exists());
    assert_eq!(translog.min_generation_for_seq_no(0), 1);
    assert_eq!(translog.min_generation_for_seq_no(9), 1);
    assert_eq!(translog.min_generation_for_seq_no(10), 2);
    assert_eq!(translog.min_generation_for_seq_no(22), 3);
    assert_eq!(translog.min_generation_for_seq_no(1000), 3);

    translog
        .trim_unreferenced(translog.min_generation_for_seq_no(12))
        .unwrap();
    assert_eq!(translog.min_generation(), 2);
    assert!(!generation_path(dir.path(), 1).exists());
    assert!(!dir.path().join("translog-1.ckp").exists());
    let seq_nos: Vec<i64> = replay(&translog).iter().map(|op| op.seq_no).collect();
    assert_eq!(seq_nos, (10..25).collect::<Vec<_>>());

    // Never deletes the current generation.
    translog.trim_unreferenced(u64::MAX).unwrap();
    assert_eq!(translog.min_generation(), 3);
    assert_eq!(translog.read(&early).unwrap().seq_no, 20);
    translog.close().unwrap();

    let (reopened, info) = open(dir.path());
    assert_eq!((info.min_generation, info.current_generation), (3, 3));
    assert_eq!(reopened.stats().operations, 5);
}

#[test]
fn add_rolls_generation_when_threshold_is_exceeded() {
    let dir = tempfile::tempdir().unwrap();
    let config = TranslogConfig {
        generation_threshold_size: 1024,
        ..config()
    };
    let translog = Translog::create(dir.path(), config.clone()).unwrap();
    let locations: Vec<Location> = (0..100)
        .map(|seq| translog.add(&index_op(seq, 1)).unwrap())
        .collect();
    assert!(translog.current_generation() > 3);
    for (seq_no, location) in locations.iter().enumerate() {
        assert_eq!(translog.read(location).unwrap().seq_no, seq_no as i64);
    }
    translog.close().unwrap();
    let (reopened, info) = Translog::open(dir.path(), config, None).unwrap();
    assert_eq!(info.operations, 100);
    assert_eq!(replay(&reopened).len(), 100);
}

#[test]
fn snapshot_dedups_repeated_seq_nos_keeping_highest_term() {
    let dir = tempfile::tempdir().unwrap();
    let translog = Translog::create(dir.path(), config()).unwrap();
    translog.add(&index_op(0, 1)).unwrap();
    translog.add(&index_op(1, 2)).unwrap();
    translog.add(&index_op(2, 1)).unwrap();
    translog.roll_generation().unwrap();
    translog.add(&index_op(1, 1)).unwrap(); // replayed older term: loses
    translog.add(&index_op(2, 3)).unwrap(); // newer term: wins
    let mut later_same_term = index_op(0, 1);
    later_same_term.source = b"{\"later\":true}".to_vec();
    translog.add(&later_same_term).unwrap(); // equal term: later wins
    translog.add(&index_op(3, 3)).unwrap();

    let snapshot = translog.snapshot(0, 2).unwrap();
    assert_eq!(snapshot.total_ops(), 3);
    let ops: Vec<Operation> = snapshot.map(Result::unwrap).collect();
    // File order of the winners.
    assert_eq!(seq_nos_and_terms(&ops), [(1, 2), (2, 3), (0, 1)]);
    assert_eq!(ops[2].source, later_same_term.source);
    assert_eq!(translog.snapshot(3, 3).unwrap().total_ops(), 1);
    assert_eq!(translog.snapshot(4, 10).unwrap().total_ops(), 0);
}

#[test]
fn trim_operations_above_hides_older_term_ops_and_persists() {
    let dir = tempfile::tempdir().unwrap();
    let translog = Translog::create(dir.path(), config()).unwrap();
    for seq_no in 0..6 {
        translog.add(&index_op(seq_no, 1)).unwrap();
    }
    // New primary (term 2) resynced up to seq_no 3 and trims the rest of term 1.
    translog.trim_operations_above(2, 3).unwrap();
    translog.add(&index_op(5, 2)).unwrap();
    translog.add(&index_op(6, 2)).unwrap();
    let expected = [(0, 1), (1, 1), (2, 1), (3, 1), (5, 2), (6, 2)];
    assert_eq!(seq_nos_and_terms(&replay(&translog)), expected);
    drop(translog);

    let (reopened, _) = open(dir.path());
    assert_eq!(seq_nos_and_terms(&replay(&reopened)), expected);
}

#[test]
fn wrong_uuid_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let translog = Translog::create(dir.path(), config()).unwrap();
    let uuid = translog.uuid().to_string();
    translog.close().unwrap();
    let err = Translog::open(dir.path(), config(), Some("another-shards-translog")).unwrap_err();
    assert!(matches!(err, TranslogError::UuidMismatch { found, .. } if found == uuid));
    assert!(Translog::open(dir.path(), config(), Some(&uuid)).is_ok());
}

#[test]
fn create_refuses_existing_translog_and_open_needs_one() {
    let dir = tempfile::tempdir().unwrap();
    let err = Translog::open(dir.path(), config(), None).unwrap_err();
    assert!(matches!(err, TranslogError::MissingCheckpoint(_)));
    Translog::create(dir.path(), config())
        .unwrap()
        .close()
        .unwrap();
    let err = Translog::create(dir.path(), config()).unwrap_err();
    assert!(matches!(err, TranslogError::AlreadyExists(_)));
}

#[test]
fn global_checkpoint_is_persisted_by_sync() {
    let dir = tempfile::tempdir().unwrap();
    let translog = Translog::create(dir.path(), config()).unwrap();
    translog.add(&index_op(0, 1)).unwrap();
    translog.set_global_checkpoint(0);
    assert!(translog.sync_needed());
    translog.sync().unwrap();
    assert_eq!(translog.last_synced_global_checkpoint(), 0);
    translog.set_global_checkpoint(7); // not synced: lost on crash
    drop(translog);
    let (reopened, info) = open(dir.path());
    assert_eq!(info.global_checkpoint, 0);
    assert_eq!(reopened.global_checkpoint(), 0);
}

#[test]
fn stats_split_committed_and_uncommitted_generations() {
    let dir = tempfile::tempdir().unwrap();
    let translog = Translog::create(dir.path(), config()).unwrap();
    let empty = translog.stats();
    assert_eq!(
        (empty.operations, empty.generation, empty.min_generation),
        (0, 1, 1)
    );
    assert_eq!(translog.max_seq_no(), NO_OPS_PERFORMED);
    translog.add(&index_op(0, 1)).unwrap();
    translog.add(&index_op(1, 1)).unwrap();
    let new_generation = translog.roll_generation().unwrap();
    translog.add(&index_op(2, 1)).unwrap();
    translog.mark_committed(new_generation);

    let stats = translog.stats();
    assert_eq!(stats.operations, 3);
    assert_eq!(stats.uncommitted_operations, 1);
    assert!(stats.uncommitted_size_in_bytes < stats.size_in_bytes);
    let file_sizes: u64 = (1..=2)
        .map(|generation| {
            std::fs::metadata(generation_path(dir.path(), generation))
                .unwrap()
                .len()
        })
        .sum();
    assert_eq!(stats.size_in_bytes, file_sizes);
    assert!(stats.earliest_last_modified_age_ms < 60_000);
}

#[test]
fn open_deletes_orphan_generation_of_an_interrupted_roll() {
    let dir = tempfile::tempdir().unwrap();
    let translog = Translog::create(dir.path(), config()).unwrap();
    translog.add(&index_op(0, 1)).unwrap();
    translog.close().unwrap();
    // A roll that crashed after creating the next file but before switching translog.ckp.
    std::fs::write(generation_path(dir.path(), 2), b"SHOALTLG half a header").unwrap();
    std::fs::write(dir.path().join("translog-1.ckp"), b"stale").unwrap();

    let (reopened, info) = open(dir.path());
    assert_eq!(info.current_generation, 1);
    assert!(!generation_path(dir.path(), 2).exists());
    assert_eq!(reopened.roll_generation().unwrap(), 2);
    reopened.add(&index_op(1, 1)).unwrap();
    assert_eq!(replay(&reopened).len(), 2);
}

#[test]
fn snapshot_keeps_reading_generations_trimmed_after_it_was_taken() {
    let dir = tempfile::tempdir().unwrap();
    let translog = Translog::create(dir.path(), config()).unwrap();
    translog.add(&index_op(0, 1)).unwrap();
    translog.roll_generation().unwrap();
    translog.add(&index_op(1, 1)).unwrap();
    let snapshot = translog.snapshot(0, 10).unwrap();
    translog.trim_unreferenced(2).unwrap();
    let seq_nos: Vec<i64> = snapshot.map(|op| op.unwrap().seq_no).collect();
    assert_eq!(seq_nos, [0, 1]);
}

#[test]
fn invalid_operations_and_locations_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let translog = Translog::create(dir.path(), config()).unwrap();
    let err = translog.add(&index_op(-2, 1)).unwrap_err();
    assert!(matches!(err, TranslogError::InvalidOperation(_)));
    let location = translog.add(&index_op(0, 1)).unwrap();
    let wrong_generation = Location {
        generation: 9,
        ..location
    };
    let past_end = Location {
        offset: location.end(),
        ..location
    };
    for bad in [wrong_generation, past_end] {
        assert!(matches!(
            translog.read(&bad),
            Err(TranslogError::InvalidLocation { .. })
        ));
    }
}

#[test]
fn a_translog_that_failed_in_this_process_reopens_with_only_its_synced_part() {
    let dir = tempfile::tempdir().unwrap();
    // After a failed fsync the unsynced ops 3 and 4 may exist only in the page cache.
    let translog = synced_three_then_two_unsynced(dir.path());
    crate::failed_dirs::mark(dir.path());
    drop(translog);

    let (reopened, info) = open(dir.path());
    assert_eq!(info.unsynced_operations_recovered, 0);
    assert!(info.truncated_bytes > 0);
    let seq_nos: Vec<i64> = replay(&reopened).iter().map(|op| op.seq_no).collect();
    assert_eq!(seq_nos, [0, 1, 2]);
    let location = reopened.add(&index_op(3, 2)).unwrap();
    reopened.sync().unwrap();
    drop(reopened);

    // Only the open right after the failure distrusts the tail.
    let (again, info) = open(dir.path());
    assert_eq!(info.truncated_bytes, 0);
    assert_eq!(again.read(&location).unwrap(), index_op(3, 2));
    assert_eq!(replay(&again).len(), 4);
}

/// A translog with ops 0..3 synced and ops 3 and 4 written after the last sync.
fn synced_three_then_two_unsynced(dir: &std::path::Path) -> Translog {
    let translog = Translog::create(dir, config()).unwrap();
    for seq_no in 0..3 {
        translog.add(&index_op(seq_no, 1)).unwrap();
    }
    translog.sync().unwrap();
    translog.add(&index_op(3, 1)).unwrap();
    translog.add(&index_op(4, 1)).unwrap();
    translog
}
