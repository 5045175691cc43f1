//! A copy's own state, on a real engine.

use std::sync::Arc;

use shoal_engine::{Engine, EngineConfig};
use shoal_types::ShardId;

use super::IndexShard;

fn copy(dir: &std::path::Path) -> IndexShard {
    let parse = |_: &str, _: &[u8]| Ok(Default::default());
    let engine = Engine::open(EngineConfig::new(dir.to_path_buf()), 1, &parse).unwrap();
    let id = ShardId {
        index_uuid: "uuid".into(),
        shard: 0,
    };
    IndexShard::new("logs", id, Arc::new(engine))
}

#[test]
fn a_copy_stops_acting_as_primary_once_it_hands_its_role_off_or_leaves_the_node() {
    let dir = tempfile::tempdir().unwrap();
    let copy = copy(dir.path());
    assert!(!copy.stopped_acting_as_primary());

    copy.hand_off_primary().unwrap();
    assert!(
        copy.stopped_acting_as_primary(),
        "handed off to a relocation target"
    );
    copy.resume_after_cancelled_relocation();
    assert!(
        !copy.stopped_acting_as_primary(),
        "the relocation was cancelled"
    );

    copy.mark_removed();
    assert!(copy.stopped_acting_as_primary(), "moved to another node");
    copy.resume_after_cancelled_relocation();
    assert!(
        copy.stopped_acting_as_primary(),
        "a copy that left stays gone"
    );
}

#[test]
fn a_segment_upload_of_a_copy_that_left_the_node_writes_no_metadata_file() {
    let dir = tempfile::tempdir().unwrap();
    let copy = copy(dir.path());
    assert!(crate::remote::segments::still_uploading(&copy).is_ok());
    copy.mark_removed();
    let stopped = crate::remote::segments::still_uploading(&copy).unwrap_err();
    assert_eq!(stopped.error_type, "shard_not_in_primary_mode_exception");
    assert!(stopped.reason.contains("[logs][0]"), "{}", stopped.reason);
}
