//! Search coordination: fan a request out to shard searchers and merge (filled in once the
//! search execution module lands), plus scroll contexts.

use std::collections::HashMap;

use parking_lot::Mutex;

/// Open scroll contexts by id.
#[derive(Default)]
pub struct ScrollRegistry {
    pub contexts: Mutex<HashMap<String, ()>>,
}
