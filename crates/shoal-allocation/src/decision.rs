//! Decider verdicts and their combination (`Decision` / `Decision.Multi` in OpenSearch).

use std::borrow::Cow;

use serde_json::{json, Value};

/// How bad a verdict is; the combination of several is the worst one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DecisionKind {
    Yes,
    Throttle,
    No,
}

impl DecisionKind {
    /// The `decision` field of a decider entry in explanations.
    pub fn as_upper(self) -> &'static str {
        match self {
            DecisionKind::Yes => "YES",
            DecisionKind::Throttle => "THROTTLE",
            DecisionKind::No => "NO",
        }
    }

    /// `AllocationDecision` rendering (`yes`, `throttled`, `no`) used by `node_decision` and
    /// `can_allocate`.
    pub fn as_allocation_decision(self) -> &'static str {
        match self {
            DecisionKind::Yes => "yes",
            DecisionKind::Throttle => "throttled",
            DecisionKind::No => "no",
        }
    }

    /// `UnassignedInfo.AllocationStatus` stored on copies left unassigned.
    pub fn as_allocation_status(self) -> &'static str {
        match self {
            DecisionKind::Yes => "no_attempt",
            DecisionKind::Throttle => "throttled",
            DecisionKind::No => "no",
        }
    }
}

/// One decider's verdict with OpenSearch's explanation text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Yes(Cow<'static, str>),
    Throttle(Cow<'static, str>),
    No(Cow<'static, str>),
}

impl Decision {
    /// "This decider has nothing to say": never listed in explanations (`Decision.ALWAYS`).
    pub const ALWAYS: Decision = Decision::Yes(Cow::Borrowed(""));

    pub fn yes(text: impl Into<Cow<'static, str>>) -> Decision {
        Decision::Yes(text.into())
    }

    pub fn no(text: impl Into<Cow<'static, str>>) -> Decision {
        Decision::No(text.into())
    }

    pub fn throttle(text: impl Into<Cow<'static, str>>) -> Decision {
        Decision::Throttle(text.into())
    }

    pub fn kind(&self) -> DecisionKind {
        match self {
            Decision::Yes(_) => DecisionKind::Yes,
            Decision::Throttle(_) => DecisionKind::Throttle,
            Decision::No(_) => DecisionKind::No,
        }
    }

    pub fn explanation(&self) -> &str {
        match self {
            Decision::Yes(t) | Decision::Throttle(t) | Decision::No(t) => t,
        }
    }

    pub fn is_always(&self) -> bool {
        matches!(self, Decision::Yes(t) if t.is_empty())
    }
}

/// Which verdicts a combined decision keeps (`RoutingAllocation.DebugMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DebugMode {
    /// Allocation proper: stop at the first NO, keep only what is not YES.
    Off,
    /// Explain API without `include_yes_decisions`: ask every decider, keep what is not YES.
    ExcludeYes,
    /// Explain with `include_yes_decisions`, and reroute commands: keep everything.
    On,
}

impl DebugMode {
    pub fn explaining(self) -> bool {
        self != DebugMode::Off
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabeledDecision {
    pub decider: &'static str,
    pub decision: Decision,
}

/// Several deciders' verdicts (`Decision.Multi`): YES unless one says THROTTLE or NO.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Decisions {
    kind: Option<DecisionKind>,
    pub entries: Vec<LabeledDecision>,
}

impl Decisions {
    pub fn kind(&self) -> DecisionKind {
        self.kind.unwrap_or(DecisionKind::Yes)
    }

    /// Records a verdict; `ALWAYS` and (unless `mode` is `On`) plain YES are not kept.
    pub fn add(&mut self, decider: &'static str, decision: Decision, mode: DebugMode) {
        self.kind = Some(self.kind().max(decision.kind()));
        let keep = !decision.is_always()
            && (mode == DebugMode::On || decision.kind() != DecisionKind::Yes);
        if keep {
            self.entries.push(LabeledDecision { decider, decision });
        }
    }

    /// `[{decider, decision, explanation}, ...]` as in explain responses.
    pub fn to_json(&self) -> Vec<Value> {
        self.entries
            .iter()
            .map(|e| {
                json!({
                    "decider": e.decider,
                    "decision": e.decision.kind().as_upper(),
                    "explanation": e.decision.explanation(),
                })
            })
            .collect()
    }

    /// `Decision.Multi.toString()`: `[NO(explanation)][YES(explanation)]`, used in the
    /// reroute command errors.
    pub fn to_java_string(&self) -> String {
        self.entries
            .iter()
            .map(|e| {
                format!(
                    "[{}({})]",
                    e.decision.kind().as_upper(),
                    e.decision.explanation()
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combination_is_the_worst_verdict() {
        let mut d = Decisions::default();
        assert_eq!(d.kind(), DecisionKind::Yes);
        d.add("a", Decision::yes("fine"), DebugMode::Off);
        d.add("b", Decision::throttle("slow"), DebugMode::Off);
        assert_eq!(d.kind(), DecisionKind::Throttle);
        d.add("c", Decision::no("never"), DebugMode::Off);
        assert_eq!(d.kind(), DecisionKind::No);
        assert_eq!(d.entries.len(), 2, "plain YES is dropped unless debugging");
        assert_eq!(d.to_java_string(), "[THROTTLE(slow)][NO(never)]");
    }

    #[test]
    fn always_is_never_listed() {
        let mut d = Decisions::default();
        d.add("a", Decision::ALWAYS, DebugMode::On);
        d.add("b", Decision::yes("ok"), DebugMode::On);
        assert_eq!(
            d.to_json(),
            vec![json!({"decider": "b", "decision": "YES", "explanation": "ok"})]
        );
    }
}
