//! Running tasks, as OpenSearch's task manager lists them: every REST request a node serves is
//! a task while it runs (`_tasks`, `_cat/tasks`), and a coordinator's work on other nodes is a
//! child task there. A task started to run in the background (`wait_for_completion=false`)
//! keeps its outcome on its node after it ends, for `GET /_tasks/{id}`: in memory, the last
//! [`STORED_RESULTS`] of them, not in OpenSearch's `.tasks` index, so a node restart forgets
//! them. None can be cancelled yet.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::core::NodeCore;
use crate::error::ApiResult;

/// A task while it runs.
#[derive(Debug)]
struct Running {
    action: String,
    description: String,
    parent: Option<String>,
    headers: BTreeMap<String, String>,
    start_time_in_millis: i64,
    started: Instant,
}

/// What `_tasks` shows of a task (OpenSearch's `TaskInfo`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TaskInfo {
    pub node: String,
    pub id: u64,
    #[serde(rename = "type")]
    pub kind: String,
    pub action: String,
    pub description: String,
    pub start_time_in_millis: i64,
    pub running_time_in_nanos: u64,
    pub cancellable: bool,
    pub cancelled: bool,
    /// `node:id` of the task that started this one on another node.
    pub parent_task_id: Option<String>,
    pub headers: BTreeMap<String, String>,
}

impl TaskInfo {
    /// OpenSearch's task id, `node:id`.
    pub fn task_id(&self) -> String {
        format!("{}:{}", self.node, self.id)
    }
}

/// The tasks running on this node.
pub struct TaskManager {
    node_id: String,
    next_id: AtomicU64,
    running: Mutex<BTreeMap<u64, Running>>,
    /// Background tasks that ended, oldest first.
    finished: Mutex<VecDeque<StoredTask>>,
}

/// How many ended background tasks a node keeps the outcome of.
pub const STORED_RESULTS: usize = 1000;

/// A background task that ended, with what it answered (`response`) or why it failed
/// (`error`, in OpenSearch's error shape), as `GET /_tasks/{id}` shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredTask {
    pub task: TaskInfo,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<serde_json::Value>,
}

/// Removes its task from the running ones when dropped (the request ended).
pub struct TaskGuard {
    manager: Arc<TaskManager>,
    id: u64,
}

impl TaskGuard {
    /// `node:id` of this task, to name it as the parent of work it asks other nodes for.
    pub fn task_id(&self) -> String {
        format!("{}:{}", self.manager.node_id, self.id)
    }
}

impl TaskGuard {
    /// Ends a background task, keeping its outcome for `GET /_tasks/{id}`.
    pub fn finish(self, outcome: Result<serde_json::Value, crate::error::ApiError>) {
        let filter = TaskFilter {
            id: Some(self.id),
            ..TaskFilter::default()
        };
        let Some(task) = self.manager.list(&filter).pop() else {
            return;
        };
        let (response, error) = match outcome {
            Ok(response) => (Some(response), None),
            Err(e) => (None, Some(e.to_cause_json())),
        };
        let mut finished = self.manager.finished.lock();
        if finished.len() == STORED_RESULTS {
            finished.pop_front();
        }
        finished.push_back(StoredTask {
            task,
            response,
            error,
        });
    }
}

impl Drop for TaskGuard {
    fn drop(&mut self) {
        self.manager.running.lock().remove(&self.id);
    }
}

/// Which tasks a listing wants (OpenSearch's `actions`, `parent_task_id` and task id).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TaskFilter {
    /// Wildcard patterns of action names; empty: every action.
    pub actions: Vec<String>,
    pub parent_task_id: Option<String>,
    pub id: Option<u64>,
    /// The listing task this node's part runs under.
    pub listing_parent: Option<String>,
}

impl TaskManager {
    pub fn new(node_id: String) -> Arc<TaskManager> {
        Arc::new(TaskManager {
            node_id,
            next_id: AtomicU64::new(1),
            running: Mutex::new(BTreeMap::new()),
            finished: Mutex::new(VecDeque::new()),
        })
    }

    /// The outcome of background task `id` if it ended and is still kept.
    pub fn stored(&self, id: u64) -> Option<StoredTask> {
        let finished = self.finished.lock();
        finished.iter().rev().find(|t| t.task.id == id).cloned()
    }

    /// Task `id` while it runs, else its kept outcome. Running is looked at first: an ending
    /// task's outcome is kept before it stops running, so it is never in neither.
    pub fn lookup(&self, id: u64) -> Option<TaskLookup> {
        let filter = TaskFilter {
            id: Some(id),
            ..TaskFilter::default()
        };
        if let Some(task) = self.list(&filter).pop() {
            return Some(TaskLookup::Running(task));
        }
        self.stored(id).map(TaskLookup::Ended)
    }

    /// Registers a task running until the guard is dropped.
    pub fn register(
        self: &Arc<Self>,
        action: &str,
        description: String,
        parent: Option<String>,
        headers: BTreeMap<String, String>,
    ) -> TaskGuard {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let task = Running {
            action: action.to_string(),
            description,
            parent,
            headers,
            start_time_in_millis: crate::node::now_millis(),
            started: Instant::now(),
        };
        self.running.lock().insert(id, task);
        TaskGuard {
            manager: self.clone(),
            id,
        }
    }

    /// The running tasks `filter` selects, oldest first.
    pub fn list(&self, filter: &TaskFilter) -> Vec<TaskInfo> {
        let running = self.running.lock();
        running
            .iter()
            .filter(|(id, task)| filter.selects(**id, task))
            .map(|(id, task)| TaskInfo {
                node: self.node_id.clone(),
                id: *id,
                kind: "transport".to_string(),
                action: task.action.clone(),
                description: task.description.clone(),
                start_time_in_millis: task.start_time_in_millis,
                running_time_in_nanos: task.started.elapsed().as_nanos() as u64,
                cancellable: false,
                cancelled: false,
                parent_task_id: task.parent.clone(),
                headers: task.headers.clone(),
            })
            .collect()
    }
}

impl TaskFilter {
    fn selects(&self, id: u64, task: &Running) -> bool {
        self.id.is_none_or(|wanted| wanted == id)
            && (self.actions.is_empty()
                || self
                    .actions
                    .iter()
                    .any(|p| crate::routing::wildcard_match(p, &task.action)))
            && self
                .parent_task_id
                .as_ref()
                .is_none_or(|parent| task.parent.as_ref() == Some(parent))
    }
}

/// Transport action listing a node's running tasks (its own part of `_tasks`).
pub struct ListTasksAction;
impl shoal_transport::Action for ListTasksAction {
    const NAME: &'static str = "cluster:monitor/tasks/lists[n]";
    type Request = TaskFilter;
    type Response = Vec<TaskInfo>;
}

/// A task as its node knows it: running, or ended in the background with its outcome kept.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum TaskLookup {
    Running(TaskInfo),
    Ended(StoredTask),
}

/// Transport action reading one task of a node, running or ended (`GET /_tasks/{id}`).
pub struct TaskLookupAction;
impl shoal_transport::Action for TaskLookupAction {
    const NAME: &'static str = "cluster:monitor/task/get[n]";
    type Request = u64;
    type Response = Option<TaskLookup>;
}

/// Lists the running tasks of the cluster's nodes.
pub struct TasksService {
    core: Arc<NodeCore>,
}

pub(crate) fn register_actions(actions: &mut crate::rpc::NodeActions, service: &Arc<TasksService>) {
    actions.register_on::<ListTasksAction, _>(Arc::downgrade(service), |service, filter| {
        Ok(service.local_tasks(&filter))
    });
    actions.register_on::<TaskLookupAction, _>(Arc::downgrade(service), |service, id| {
        Ok(service.core.tasks.lookup(id))
    });
}

impl TasksService {
    pub(crate) fn new(core: Arc<NodeCore>) -> TasksService {
        TasksService { core }
    }

    /// This node's part of a listing: it runs as a child task of the listing, so it lists
    /// itself, as OpenSearch's `[n]` task does.
    fn local_tasks(&self, filter: &TaskFilter) -> Vec<TaskInfo> {
        let _part = self.core.tasks.register(
            ListTasksAction::NAME_STR,
            String::new(),
            filter.listing_parent.clone(),
            BTreeMap::new(),
        );
        self.core.tasks.list(filter)
    }

    /// The running tasks of each node of `ids`, in that order; a node that does not answer is
    /// an error in its place.
    pub fn list(
        &self,
        ids: &[String],
        filter: &TaskFilter,
        timeout: Duration,
    ) -> Vec<(String, ApiResult<Vec<TaskInfo>>)> {
        self.core
            .ask_each_node::<ListTasksAction>(ids, filter, timeout, || self.local_tasks(filter))
    }
}

impl TasksService {
    /// Task `id` of node `node_id`, running or ended with its outcome kept; `None` when the
    /// node knows nothing of it.
    pub fn lookup(
        &self,
        node_id: &str,
        id: u64,
        timeout: Duration,
    ) -> ApiResult<Option<TaskLookup>> {
        let (_, answer) = self
            .core
            .ask_each_node::<TaskLookupAction>(&[node_id.to_string()], &id, timeout, || {
                self.core.tasks.lookup(id)
            })
            .pop()
            .expect("one node asked");
        answer
    }
}

impl ListTasksAction {
    const NAME_STR: &'static str = <ListTasksAction as shoal_transport::Action>::NAME;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn background(manager: &Arc<TaskManager>) -> TaskGuard {
        manager.register(
            "indices:admin/forcemerge",
            "merge".into(),
            None,
            BTreeMap::new(),
        )
    }

    #[test]
    fn an_ended_background_task_keeps_its_answer_or_error_and_only_the_newest_are_kept() {
        let manager = TaskManager::new("n1".into());
        let done = background(&manager);
        let done_id = done.id;
        assert!(manager.stored(done_id).is_none(), "running, not ended");
        done.finish(Ok(serde_json::json!({"_shards": {"total": 1}})));
        let stored = manager.stored(done_id).expect("kept");
        assert_eq!(stored.task.action, "indices:admin/forcemerge");
        assert_eq!(stored.response.unwrap()["_shards"]["total"], 1);
        assert!(manager.list(&TaskFilter::default()).is_empty());

        let failed = background(&manager);
        let failed_id = failed.id;
        failed.finish(Err(crate::error::ApiError::bad_request("no such thing")));
        let error = manager.stored(failed_id).unwrap().error.unwrap();
        assert_eq!(error["type"], "illegal_argument_exception");
        assert_eq!(error["reason"], "no such thing");

        for _ in 0..STORED_RESULTS {
            background(&manager).finish(Ok(serde_json::json!({})));
        }
        assert!(manager.stored(done_id).is_none(), "the oldest gives way");
        // A task that simply ended (a REST request) keeps nothing.
        let request = background(&manager);
        let request_id = request.id;
        drop(request);
        assert!(manager.stored(request_id).is_none());
    }
}
