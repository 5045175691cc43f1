//! A commit without a write stall. tantivy's `prepare_commit` needs the index writer for
//! itself while its indexing threads write their segments (a couple of hundred milliseconds
//! under load), and the writer lives under the engine's write lock: holding that lock for the
//! whole commit stopped every write for as long (the bulk p99 was a refresh long). So a commit
//! takes the writer out of the write state and lets the lock go; writes meanwhile are logged,
//! versioned and acknowledged as usual, and their tantivy operations wait here, in order,
//! until the commit gives the writer back and hands them to it. They were not in the commit
//! (its payload was taken before), so they are in the next one.
//!
//! Only a few hundred documents wait that way: on a node out of CPU, parsing and logging more
//! writes during the commit takes the cores its segment writing needs, and the commit (so the
//! refresh, so what searches see) ends later by as much. Beyond them writes wait for the end
//! of the commit: indexing goes on at the same rate, a write that comes during a commit under
//! saturation is acknowledged up to a commit later, and the commit is shorter.

use std::collections::HashSet;
use std::time::Duration;

use parking_lot::MutexGuard;

use super::*;
use crate::id_filter::IdDeleteQuery;

/// Documents that may wait for a commit (see the module's comment): a bulk request or so.
/// The bound also keeps a commit slowed down (a stalled disk) from piling acknowledged
/// documents up in memory. On 2 cores under a saturating bulk load (2 nodes, SEGMENT) the
/// commit's segment writing took p50 347 ms with 10,000, 205 ms with 500, at the same docs/s.
pub(crate) const MAX_PENDING_DOCS: usize = 500;

/// The writer's operations made while a commit held it, in their order.
#[derive(Default)]
pub(super) struct Pending {
    operations: Vec<PendingOperation>,
    /// The ids they touch: their version-map entries must outlive the commit's pruning.
    ids: HashSet<String>,
}

enum PendingOperation {
    Delete(IdDeleteQuery),
    Add(TantivyDocument),
}

impl WriteState {
    /// Deletes every document with `_id` `id`, now or after the running commit.
    pub(super) fn delete_id(&mut self, id: &str, delete: IdDeleteQuery) -> tantivy::Result<()> {
        self.index_op(id, PendingOperation::Delete(delete))
    }

    /// Adds `doc`, whose `_id` is `id`, now or after the running commit.
    pub(super) fn add_document(&mut self, id: &str, doc: TantivyDocument) -> tantivy::Result<()> {
        self.index_op(id, PendingOperation::Add(doc))
    }

    fn index_op(&mut self, id: &str, operation: PendingOperation) -> tantivy::Result<()> {
        if let Some(writer) = self.writer.as_mut() {
            return operation.apply(writer);
        }
        let pending = self
            .committing
            .as_mut()
            .expect("a writer-less engine never indexes");
        pending.ids.insert(id.to_string());
        pending.operations.push(operation);
        Ok(())
    }
}

impl PendingOperation {
    fn apply(self, writer: &IndexWriter) -> tantivy::Result<()> {
        match self {
            PendingOperation::Delete(query) => writer.delete_query(Box::new(query)).map(drop),
            PendingOperation::Add(doc) => writer.add_document(doc).map(drop),
        }
    }
}

/// Fails the engine if tantivy panics while a commit holds the writer: the writer is gone
/// with the unwinding, and writes must neither queue for it forever nor be indexed by nobody.
struct PanicGuard<'a> {
    engine: &'a Engine,
}

impl Drop for PanicGuard<'_> {
    fn drop(&mut self) {
        let engine = self.engine;
        engine.fail_engine("the index writer panicked during a commit".into());
        engine.state.lock().committing = None;
        engine.commit_ended.notify_all();
    }
}

impl Engine {
    /// How many operations wait for the running commit.
    #[cfg(test)]
    pub(crate) fn pending_operations(&self) -> usize {
        let state = self.state.lock();
        state.committing.as_ref().map_or(0, |p| p.operations.len())
    }

    /// Waits, the write lock let go meanwhile, while a running commit holds as many waiting
    /// documents as it may.
    pub(super) fn wait_for_room(&self, state: &mut MutexGuard<'_, WriteState>) {
        while self.failure().is_none()
            && state
                .committing
                .as_ref()
                .is_some_and(|p| p.operations.len() >= MAX_PENDING_DOCS)
        {
            self.commit_ended.wait(state);
        }
    }

    /// Commits what the writer holds with a payload of the checkpoints now, holding the
    /// write lock only at the start and the end; returns it held again, with the local
    /// checkpoint the commit holds. The caller holds the commit lock.
    pub(super) fn commit<'a>(
        &'a self,
        mut state: MutexGuard<'a, WriteState>,
    ) -> Result<(MutexGuard<'a, WriteState>, i64), EngineError> {
        debug_assert!(state.committing.is_none() && state.writer.is_some());
        // A failed engine's writer may have lost documents its payload would claim.
        self.ensure_open()?;
        // The commit must not hold operations the translog could lose to a power cut: the
        // translog is what tells a copy's history above its checkpoints.
        self.sync_translog()?;
        let payload = self.payload_now(&state);
        let mut writer = state.writer.take().expect("a commit needs the writer");
        state.committing = Some(Pending::default());
        state.dirty = false;
        drop(state);
        let started = Instant::now();
        let unwinding = PanicGuard { engine: self };
        let outcome = self.commit_writer(&mut writer, &payload);
        std::mem::forget(unwinding);
        let mut state = self.state.lock();
        state.writer = Some(writer);
        let pending = state.committing.take().unwrap_or_default();
        self.commit_ended.notify_all();
        let committed_at = started.elapsed();
        // A failed commit failed the engine: its writer may have no indexing thread left
        // (documents sent to it would queue until the channel blocks), and the translog
        // holds the writes that waited.
        let prepared_in = outcome?;
        // The reader first: handing the waiting operations to the writer can block on its
        // indexing threads, and the commit's documents should not wait for that to be seen.
        let reloaded = self.reader.reload();
        let reloaded_at = started.elapsed();
        self.hand_to_writer(&mut state, pending.operations)?;
        if let Err(e) = reloaded {
            // The commit's documents are not searched yet: the next refresh must reload.
            state.dirty = true;
            return Err(e.into());
        }
        // Where a slow commit spends its time: `prepared_ms` is tantivy's indexing threads
        // writing their segments, the rest of `committed_ms` its segment updater.
        tracing::debug!(
            prepared_ms = prepared_in.as_millis() as u64,
            committed_ms = committed_at.as_millis() as u64,
            reloaded_ms = reloaded_at.as_millis() as u64,
            handed_ms = started.elapsed().as_millis() as u64,
            "commit"
        );
        let in_commit = |id: &str| !pending.ids.contains(id);
        state
            .version_map
            .prune_refreshed(payload.max_seq_no, self.config.gc_deletes, in_commit);
        Ok((state, payload.local_checkpoint))
    }

    fn payload_now(&self, state: &WriteState) -> CommitPayload {
        let local_checkpoint = state.tracker.checkpoint();
        CommitPayload {
            local_checkpoint,
            max_seq_no: state.tracker.max_seq_no(),
            translog_uuid: self.translog.uuid().to_string(),
            translog_generation: self
                .translog
                .min_generation_for_seq_no(local_checkpoint + 1),
            global_checkpoint: self.global_checkpoint(),
            history_uuid: self.history_uuid(),
            history_complete_from: self.history_complete_from(),
        }
    }

    /// tantivy drops the documents of an indexing thread that failed (a full disk) and
    /// forgets that thread: a later commit would succeed without them. Any error here
    /// therefore fails the engine; its last good commit and the translog still hold
    /// everything acknowledged. Returns how long the indexing threads took to write their
    /// segments (`prepare_commit`).
    fn commit_writer(
        &self,
        writer: &mut IndexWriter,
        payload: &CommitPayload,
    ) -> Result<Duration, EngineError> {
        #[cfg(test)]
        if let Some(hook) = *self.commit_hook.lock() {
            hook(self);
        }
        let started = Instant::now();
        let prepared = writer.prepare_commit();
        let mut prepared = self.fail_on_error("commit failed", prepared)?;
        let prepared_in = started.elapsed();
        prepared.set_payload(&payload.to_json());
        let committed = prepared.commit();
        self.fail_on_error("commit failed", committed)?;
        Ok(prepared_in)
    }

    fn hand_to_writer(
        &self,
        state: &mut WriteState,
        operations: Vec<PendingOperation>,
    ) -> Result<(), EngineError> {
        if operations.is_empty() {
            return Ok(());
        }
        state.dirty = true;
        let writer = state.writer();
        for operation in operations {
            self.fail_on_error("index writer failed", operation.apply(writer))?;
        }
        Ok(())
    }
}
