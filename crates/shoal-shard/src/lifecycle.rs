use std::fmt;

/// Where a local copy is in its life (OpenSearch's `IndexShardState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardState {
    /// Assigned here; nothing opened yet.
    Created,
    /// Being filled: from its own store, a peer, or (later) a snapshot or the remote store.
    Recovering,
    /// Holds all its data and is waiting for the cluster manager to mark it started.
    PostRecovery,
    /// Serving reads and writes.
    Started,
    /// Closed for good under this allocation id.
    Closed,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("a shard copy cannot move from {from} to {to}")]
pub struct LifecycleError {
    pub from: ShardState,
    pub to: ShardState,
}

/// The state of one copy and the moves it may make.
#[derive(Debug)]
pub struct Lifecycle {
    state: ShardState,
}

impl Default for Lifecycle {
    fn default() -> Self {
        Self {
            state: ShardState::Created,
        }
    }
}

impl Lifecycle {
    pub fn state(&self) -> ShardState {
        self.state
    }

    /// Moves to `to` if that is a legal next step; closing is legal from anywhere but closed.
    pub fn move_to(&mut self, to: ShardState) -> Result<(), LifecycleError> {
        use ShardState::*;
        let legal = matches!(
            (self.state, to),
            (Created, Recovering)
                | (Recovering, PostRecovery)
                | (PostRecovery, Started)
                | (Created | Recovering | PostRecovery | Started, Closed)
        );
        if !legal {
            return Err(LifecycleError {
                from: self.state,
                to,
            });
        }
        self.state = to;
        Ok(())
    }

    /// Moves forward to `to` through the states in between (a copy opened from its own store
    /// passes recovering and post-recovery at once). Never moves backwards or out of closed.
    pub fn advance_to(&mut self, to: ShardState) -> Result<(), LifecycleError> {
        use ShardState::*;
        let order = |s: ShardState| match s {
            Created => 0,
            Recovering => 1,
            PostRecovery => 2,
            Started => 3,
            Closed => 4,
        };
        if to == Closed {
            return self.move_to(Closed);
        }
        if self.state == Closed || order(to) < order(self.state) {
            return Err(LifecycleError {
                from: self.state,
                to,
            });
        }
        while self.state != to {
            let next = match self.state {
                Created => Recovering,
                Recovering => PostRecovery,
                PostRecovery => Started,
                Started | Closed => unreachable!("checked above"),
            };
            self.move_to(next)?;
        }
        Ok(())
    }
}

impl fmt::Display for ShardState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ShardState::Created => "CREATED",
            ShardState::Recovering => "RECOVERING",
            ShardState::PostRecovery => "POST_RECOVERY",
            ShardState::Started => "STARTED",
            ShardState::Closed => "CLOSED",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ShardState::*;

    #[test]
    fn a_copy_goes_created_recovering_post_recovery_started() {
        let mut life = Lifecycle::default();
        for next in [Recovering, PostRecovery, Started] {
            life.move_to(next).unwrap();
        }
        assert_eq!(life.state(), Started);
    }

    #[test]
    fn a_copy_cannot_skip_recovery_or_go_back() {
        let mut life = Lifecycle::default();
        assert_eq!(
            life.move_to(Started),
            Err(LifecycleError {
                from: Created,
                to: Started
            })
        );
        life.advance_to(Started).unwrap();
        assert!(life.move_to(Recovering).is_err());
        assert!(life.advance_to(PostRecovery).is_err());
    }

    #[test]
    fn a_closed_copy_stays_closed() {
        let mut life = Lifecycle::default();
        life.move_to(Recovering).unwrap();
        life.move_to(Closed).unwrap();
        assert!(life.move_to(Closed).is_err());
        assert!(life.advance_to(Started).is_err());
        assert_eq!(life.state(), Closed);
    }

    #[test]
    fn advancing_passes_through_every_state_in_between() {
        let mut life = Lifecycle::default();
        life.advance_to(PostRecovery).unwrap();
        assert_eq!(life.state(), PostRecovery);
        life.advance_to(PostRecovery).unwrap();
        life.advance_to(Started).unwrap();
        assert_eq!(life.state().to_string(), "STARTED");
    }
}
