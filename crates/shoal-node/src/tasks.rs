//! Running tasks, as OpenSearch's task manager lists them: every REST request a node serves is
//! a task while it runs (`_tasks`, `_cat/tasks`), and a coordinator's work on other nodes is a
//! child task there. Shoal keeps no results of finished tasks (OpenSearch's `.tasks` index), so
//! a task is visible only while it runs, and none can be cancelled yet.

use std::collections::BTreeMap;
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
        })
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

/// Lists the running tasks of the cluster's nodes.
pub struct TasksService {
    core: Arc<NodeCore>,
}

pub(crate) fn register_actions(actions: &mut crate::rpc::NodeActions, service: &Arc<TasksService>) {
    actions.register_on::<ListTasksAction, _>(Arc::downgrade(service), |service, filter| {
        Ok(service.local_tasks(&filter))
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
    /// Task `id` of node `node_id` while it runs; `None` once it ended (nothing is stored).
    pub fn running(
        &self,
        node_id: &str,
        id: u64,
        timeout: Duration,
    ) -> ApiResult<Option<TaskInfo>> {
        let filter = TaskFilter {
            id: Some(id),
            ..TaskFilter::default()
        };
        let (_, answer) = self
            .list(&[node_id.to_string()], &filter, timeout)
            .pop()
            .expect("one node asked");
        Ok(answer?.pop())
    }
}

impl ListTasksAction {
    const NAME_STR: &'static str = <ListTasksAction as shoal_transport::Action>::NAME;
}
