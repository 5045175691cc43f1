use std::collections::BTreeMap;

use bytes::Bytes;
use futures::StreamExt;

use super::*;

fn attributes(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

const PREFIX: &str = "node.attr.remote_store.repository.";

fn fs_repository(dir: &std::path::Path, base_path: &str) -> Repository {
    let settings = attributes(&[
        ("location", dir.to_str().unwrap()),
        ("base_path", base_path),
    ]);
    Repository::open(RepositorySettings::new("r1", "fs", &settings).unwrap()).unwrap()
}

#[test]
fn node_attributes_describe_an_fs_and_an_s3_repository() {
    let attrs = attributes(&[
        ("node.attr.remote_store.repository.r1.type", "fs"),
        (
            "node.attr.remote_store.repository.r1.settings.location",
            "/tmp/r1",
        ),
        ("node.attr.remote_store.repository.r2.type", "s3"),
        ("node.attr.remote_store.repository.r2.settings.bucket", "b"),
        (
            "node.attr.remote_store.repository.r2.settings.endpoint",
            "http://127.0.0.1:9000",
        ),
        (
            "node.attr.remote_store.repository.r2.settings.path_style_access",
            "true",
        ),
    ]);
    let r1 = RepositorySettings::from_attributes(PREFIX, "r1", &attrs).unwrap();
    assert_eq!(
        r1.kind,
        RepositoryKind::Fs {
            location: "/tmp/r1".into()
        }
    );
    let r2 = RepositorySettings::from_attributes(PREFIX, "r2", &attrs).unwrap();
    let RepositoryKind::S3(s3) = r2.kind else {
        panic!("s3 expected")
    };
    assert_eq!(s3.bucket, "b");
    assert!(s3.path_style_access);
    assert_eq!(s3.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
}

#[test]
fn a_setting_shoal_does_not_act_on_is_refused_naming_it() {
    let attrs = attributes(&[
        ("node.attr.remote_store.repository.r1.type", "fs"),
        (
            "node.attr.remote_store.repository.r1.settings.location",
            "/tmp/r1",
        ),
        (
            "node.attr.remote_store.repository.r1.settings.compress",
            "true",
        ),
    ]);
    let error = RepositorySettings::from_attributes(PREFIX, "r1", &attrs).unwrap_err();
    assert_eq!(error.status(), 400);
    assert!(error.to_string().contains("[compress]"), "{error}");
    let error = RepositorySettings::new("r", "hdfs", &BTreeMap::new()).unwrap_err();
    assert!(error.to_string().contains("[hdfs]"), "{error}");
    let error = RepositorySettings::from_attributes(PREFIX, "missing", &attrs).unwrap_err();
    assert!(error.to_string().contains("missing.type"), "{error}");
    let error = RepositorySettings::new("r", "s3", &BTreeMap::new()).unwrap_err();
    assert!(error.to_string().contains("bucket"), "{error}");
}

#[tokio::test]
async fn objects_round_trip_list_and_delete_under_the_base_path() {
    let dir = tempfile::tempdir().unwrap();
    let repository = fs_repository(dir.path(), "cluster-a/");
    repository
        .put("idx/0/meta", Bytes::from_static(b"hello"))
        .await
        .unwrap();
    repository
        .put("idx/1/meta", Bytes::from_static(b"other"))
        .await
        .unwrap();
    assert!(dir.path().join("cluster-a/idx/0/meta").exists());
    assert_eq!(&repository.get("idx/0/meta").await.unwrap()[..], b"hello");
    let listed = repository.list("idx/0/").await.unwrap();
    let names: Vec<(&str, u64)> = listed.iter().map(|o| (o.key.as_str(), o.size)).collect();
    assert_eq!(names, vec![("idx/0/meta", 5)]);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let age = now - listed[0].modified_millis;
    assert!((0..60_000).contains(&age), "written just now: {age} ms ago");
    assert_eq!(repository.delete_folder("idx/").await.unwrap(), 2);
    let missing = repository.get("idx/0/meta").await.unwrap_err();
    assert_eq!(missing.status(), 404);
    repository
        .delete("idx/0/meta")
        .await
        .expect("deleting what is gone is fine");
}

/// A local file `big` of `mib` MiB of a repeating byte pattern in `dir`, and its content.
fn patterned_file(dir: &std::path::Path, mib: u32) -> (std::path::PathBuf, Vec<u8>) {
    let local = dir.join("big");
    let content: Vec<u8> = (0..mib * 1024 * 1024).map(|i| (i % 251) as u8).collect();
    std::fs::write(&local, &content).unwrap();
    (local, content)
}

#[tokio::test]
async fn a_large_file_goes_up_in_parts_and_streams_back_from_an_offset() {
    let dir = tempfile::tempdir().unwrap();
    let repository = fs_repository(&dir.path().join("repo"), "");
    let (local, content) = patterned_file(dir.path(), 20);
    let length = repository.put_file("seg/big", &local).await.unwrap();
    assert_eq!(length, content.len() as u64);
    let offset = 9 * 1024 * 1024 + 3;
    let mut stream = repository.get_stream("seg/big", offset).await.unwrap();
    let (mut read, mut chunks) = (Vec::new(), 0);
    while let Some(chunk) = stream.next().await {
        read.extend_from_slice(&chunk.unwrap());
        chunks += 1;
    }
    assert_eq!(read, content[offset as usize..]);
    // 11 MiB in 1 MiB reads, not object_store's 8 KiB chunks of a local file.
    assert!(chunks <= 12, "{chunks} chunks");
}

#[tokio::test]
async fn a_range_of_a_file_is_stored_alone_and_a_range_past_its_end_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let repository = fs_repository(&dir.path().join("repo"), "");
    let (local, content) = patterned_file(dir.path(), 12);
    let pacing = Pacing::UNPACED;
    // A small range goes up whole, a large one in multipart parts.
    for (key, range) in [
        ("small", 5..1_000_005u64),
        ("large", 1_000_005..12 * 1024 * 1024),
    ] {
        let stored = repository
            .put_file_range_paced(key, &local, range.clone(), &pacing)
            .await
            .unwrap();
        assert_eq!(stored, range.end - range.start);
        let read = repository.get(key).await.unwrap();
        assert_eq!(read, content[range.start as usize..range.end as usize]);
    }
    let past_the_end = 12 * 1024 * 1024 - 10..12 * 1024 * 1024 + 10;
    let error = repository
        .put_file_range_paced("short", &local, past_the_end, &pacing)
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("ended after 10 of the 20 bytes"),
        "{error}"
    );
    assert_eq!(repository.size_of("short").await.unwrap(), None);
}

#[tokio::test]
async fn a_paced_upload_stops_while_it_waits_once_cancelled_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let repository = fs_repository(&dir.path().join("repo"), "");
    let started = std::time::Instant::now();
    let cancel_after = std::time::Duration::from_millis(150);
    // One part (3 MiB) and several (20 MiB): each is told to wait a minute for its turn.
    for (name, mib) in [("small", 3u32), ("large", 20)] {
        let local = dir.path().join(name);
        std::fs::write(&local, vec![7u8; (mib * 1024 * 1024) as usize]).unwrap();
        let asked = std::time::Instant::now();
        let pacing = Pacing {
            delay: &|_| std::time::Duration::from_secs(60),
            cancelled: &|| asked.elapsed() > cancel_after,
        };
        let error = repository
            .put_file_paced(name, &local, &pacing)
            .await
            .unwrap_err();
        assert!(matches!(error, StorageError::Cancelled { .. }), "{error}");
        assert_eq!(error.status(), 409);
        assert!(
            asked.elapsed() < std::time::Duration::from_secs(2),
            "{name}: {:?}",
            asked.elapsed()
        );
        assert_eq!(repository.size_of(name).await.unwrap(), None);
    }
    let leftovers: Vec<_> = walk(&dir.path().join("repo"));
    assert!(leftovers.is_empty(), "{leftovers:?}");
    assert!(started.elapsed() < std::time::Duration::from_secs(4));
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .flat_map(|e| match e.path().is_dir() {
            true => walk(&e.path()),
            false => vec![e.path()],
        })
        .collect()
}
